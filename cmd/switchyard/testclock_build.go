//go:build switchyard_testclock

package main

// A test build (the tests of this package build the binary with -tags switchyard_testclock)
// honours SWITCHYARD_TEST_CLOCK_* (testclock.go).
func init() { testClockBuild = true }
