package testutil

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestToolsRequired(t *testing.T) {
	cases := map[string]struct {
		env  map[string]string
		want bool
	}{
		"nothing set":               {map[string]string{}, false},
		"CI=true (GitHub Actions)":  {map[string]string{"CI": "true"}, true},
		"CI=1":                      {map[string]string{"CI": "1"}, true},
		"CI=yes":                    {map[string]string{"CI": "yes"}, true},
		"CI=TRUE":                   {map[string]string{"CI": "TRUE"}, true},
		"CI empty":                  {map[string]string{"CI": ""}, false},
		"CI=false":                  {map[string]string{"CI": "false"}, false},
		"CI=False":                  {map[string]string{"CI": "False"}, false},
		"CI=0":                      {map[string]string{"CI": "0"}, false},
		"REQUIRE_TOOLS=1":           {map[string]string{RequireToolsVar: "1"}, true},
		"REQUIRE_TOOLS=0":           {map[string]string{RequireToolsVar: "0"}, false},
		"REQUIRE_TOOLS=1, CI=false": {map[string]string{"CI": "false", RequireToolsVar: "1"}, true},
		"CI=1, REQUIRE_TOOLS=0":     {map[string]string{"CI": "1", RequireToolsVar: "0"}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, got := requiredBy(lookupIn(c.env)); got != c.want {
				t.Fatalf("tools required = %v with %v; want %v", got, c.env, c.want)
			}
		})
	}
}

// recorder is a testing.TB that records how a test was ended instead of ending it.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = format }
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = format }

func TestMissingToolFailsOnlyWhenRequired(t *testing.T) {
	var r recorder
	missingTool(&r, lookupIn(map[string]string{"CI": "1"}), "needs a tool")
	if r.failed == "" || r.skipped != "" {
		t.Fatalf("under CI=1: failed %q, skipped %q; want a failure and no skip", r.failed, r.skipped)
	}
	r = recorder{}
	missingTool(&r, lookupIn(map[string]string{}), "needs a tool")
	if r.failed != "" || r.skipped == "" {
		t.Fatalf("without CI: failed %q, skipped %q; want a skip and no failure", r.failed, r.skipped)
	}
}

const childVar = "LATESTWINS_TESTUTIL_CHILD"

// TestMissingToolChild is a test that needs a tool the machine lacks. It runs only as a child
// process of TestMissingToolEndsTheTest.
func TestMissingToolChild(t *testing.T) {
	if os.Getenv(childVar) == "" {
		return
	}
	MissingTool(t, "this test needs the frobnicator")
	t.Log("still running after MissingTool")
}

// TestMissingToolEndsTheTest runs a test that lacks its tool as the go command would, with the
// environment of a CI service or of a developer, and reads how it ended.
func TestMissingToolEndsTheTest(t *testing.T) {
	if os.Getenv(childVar) != "" {
		return
	}
	cases := []struct {
		env  []string
		want string
	}{
		{nil, "--- SKIP: TestMissingToolChild"},
		{[]string{"CI=false"}, "--- SKIP: TestMissingToolChild"},
		{[]string{"CI=true"}, "--- FAIL: TestMissingToolChild"},
		{[]string{"CI=1"}, "--- FAIL: TestMissingToolChild"},
		{[]string{RequireToolsVar + "=1"}, "--- FAIL: TestMissingToolChild"},
	}
	base := []string{childVar + "=1"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "CI" && k != RequireToolsVar {
			base = append(base, kv)
		}
	}
	for _, c := range cases {
		t.Run(strings.Join(append([]string{"env"}, c.env...), " "), func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMissingToolChild$", "-test.v", "-test.count=1")
			cmd.Env = append(append([]string{}, base...), c.env...)
			out, err := cmd.CombinedOutput()
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("want %q; exit %v, output:\n%s", c.want, err, out)
			}
			var exit *exec.ExitError
			if failed := errors.As(err, &exit); failed != strings.Contains(c.want, "FAIL") {
				t.Fatalf("exit %v for %q; output:\n%s", err, c.want, out)
			}
			if strings.Contains(string(out), "still running") {
				t.Fatalf("the test went on after MissingTool; output:\n%s", out)
			}
		})
	}
}

func TestSoakRounds(t *testing.T) {
	cases := map[string]struct {
		env     map[string]string
		want    int
		wantErr bool
	}{
		"unset":    {map[string]string{}, 40, false},
		"empty":    {map[string]string{SoakRoundsVar: ""}, 40, false},
		"set":      {map[string]string{SoakRoundsVar: "2000"}, 2000, false},
		"zero":     {map[string]string{SoakRoundsVar: "0"}, 0, true},
		"negative": {map[string]string{SoakRoundsVar: "-3"}, 0, true},
		"words":    {map[string]string{SoakRoundsVar: "many"}, 0, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := soakRounds(lookupIn(c.env), 40)
			if (err != nil) != c.wantErr || got != c.want {
				t.Fatalf("soakRounds(%v, 40) = %d, %v; want %d (error: %v)", c.env, got, err, c.want, c.wantErr)
			}
		})
	}
}
