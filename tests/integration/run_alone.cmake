# Read by CTest after the discovered tests (TEST_INCLUDE_FILES). Tests whose bound is the wall
# time an honest client waits while the test itself floods the daemon: they run alone, so that
# a neighbouring test's CPU on this 2-core machine is not counted against the daemon.
set_tests_properties(
  ProxyLimits.SilentFloodFromTheSameAddressNeverLocksOutAnHonestClient
  ProxyLimits.SilentFloodCannotUseUpTheDescriptors
  ProxyH2Flood.RapidResetIsCutOffAndReachesTheOriginBoundedly
  ProxyDnsNeighbours.AFloodOfSlowLookupsDoesNotStarveTheNeighbour
  SandboxE2e.Threat29ADnsFloodDoesNotStarveTheNeighbour
  PROPERTIES RUN_SERIAL TRUE)
