// Package testutil holds what the tests of every package agree on about the machine they run on:
// when a missing tool or server is a failure rather than a skip, and how long races run.
package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Variables the tests read.
const (
	// RequireToolsVar, set, makes a missing tool or server fail the tests that need it, as CI does.
	RequireToolsVar = "LATESTWINS_REQUIRE_TOOLS"
	// SoakRoundsVar sets how many rounds the race tests run (see SoakRounds).
	SoakRoundsVar = "LATESTWINS_SOAK_ROUNDS"
)

// ToolsRequired reports whether a test must fail, not skip, when a tool or server it needs is
// missing: when CI or LATESTWINS_REQUIRE_TOOLS is set to anything but "", "0" or "false". CI
// services set CI, to "true" or to "1"; a test that skipped there would pass without running.
func ToolsRequired() bool {
	_, required := requiredBy(os.LookupEnv)
	return required
}

// requiredBy returns the setting that requires the tools ("CI=1"), if one does.
func requiredBy(lookup func(string) (string, bool)) (string, bool) {
	for _, name := range []string{"CI", RequireToolsVar} {
		if v, ok := lookup(name); ok && isSet(v) {
			return name + "=" + v, true
		}
	}
	return "", false
}

func isSet(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// MissingTool ends a test that cannot run on this machine because a tool or server is missing. msg
// says what is missing and how to get it. It fails the test when ToolsRequired, and skips it
// elsewhere.
func MissingTool(tb testing.TB, msg string) {
	tb.Helper()
	missingTool(tb, os.LookupEnv, msg)
}

func missingTool(tb testing.TB, lookup func(string) (string, bool), msg string) {
	tb.Helper()
	if by, required := requiredBy(lookup); required {
		tb.Fatalf("%s (a failure, not a skip, because %s; unset it, or set it to 0 or false, to skip instead)", msg, by)
		return
	}
	tb.Skipf("%s (set %s=1, as CI=true does, to make this a failure)", msg, RequireToolsVar)
}

// SoakRounds returns how many rounds a race test runs: def, or LATESTWINS_SOAK_ROUNDS when that is
// set (a long run: LATESTWINS_SOAK_ROUNDS=2000 go test -run Race ./internal/store/faults/). A
// value that is not a positive number fails the test.
func SoakRounds(tb testing.TB, def int) int {
	tb.Helper()
	n, err := soakRounds(os.LookupEnv, def)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func soakRounds(lookup func(string) (string, bool), def int) (int, error) {
	v, ok := lookup(SoakRoundsVar)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: give a positive number of rounds", SoakRoundsVar, v)
	}
	return n, nil
}
