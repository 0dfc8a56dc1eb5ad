# The denial summary `sandgate audit --format json` reports, computed by jq over the same log:
# per sandbox, host, port and reason, the count and the first and last @timestamp. Streams the
# input (jq -n with inputs), so jq too keeps only the groups in memory. Written for jq's speed:
# `.[$k] |= f` is ~3x slower in jq 1.6 than reading the group and setting it whole, and a
# `jq -c select(...) | jq -s group_by(...)` pipeline is no faster than this (both were tried).
reduce (inputs | select(.event.code == "SANDBOX_NETWORK_DENIED")) as $l ({};
  ($l["@timestamp"]) as $t
  | ([$l.labels.sandbox_id // "", $l.destination.address // "", $l.destination.port // 0,
      $l.event.reason // ""] | tojson) as $k
  | .[$k] as $g
  | .[$k] = (if $g == null then {count: 1, first: $t, last: $t}
             else {count: ($g.count + 1),
                   first: (if $t < $g.first then $t else $g.first end),
                   last: (if $t > $g.last then $t else $g.last end)} end))
