package pass

import (
	"os"
	"testing"
)

// TestMain lets this test binary act as the guard of the commands the tests supervise, as the
// latestwins binary does.
func TestMain(m *testing.M) {
	MaybeGuard()
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// A guard built with -race would otherwise wait a second at exit.
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}
