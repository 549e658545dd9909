package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts writing a CPU profile to path (train's hidden --cpuprofile); stop
// ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, usagef("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		file.Close()
		return nil, usagef("--cpuprofile %s: %v", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := file.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "dpsgd: --cpuprofile %s: %v\n", path, err)
		}
	}, nil
}
