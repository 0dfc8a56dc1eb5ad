// A Go program as most are written: net/http's default client, which takes its proxy from
// HTTP_PROXY / HTTPS_PROXY (credentials in the URL). Prints the status line and the body;
// on an error (a refused CONNECT), the error as Go reports it. Exit 0 only on a 200.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	os.Stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		os.Exit(2)
	}
}
