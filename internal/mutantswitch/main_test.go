package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

const original = `package calc

// Sum adds.
func Sum(xs ...int) (total int) {
	for _, x := range xs {
		total += x
	}
	return total
}

type Box[T any] struct{ v T }

func (b *Box[T]) Set(v T) { b.v = v }

func (b *Box[T]) Get() T { return b.v }

func Pick[T any](a, b T, first bool) T {
	if first {
		return a
	}
	return b
}

var limit = 3

func Limit() int { return limit }
`

const probe = `package calc

import (
	"fmt"
	"testing"
)

func TestProbe(t *testing.T) {
	b := &Box[string]{}
	b.Set("x")
	fmt.Printf("probe %d %s %s %d\n", Sum(1, 2, 3), b.Get(), Pick("a", "b", true), Limit())
}
`

// TestSwitchedBuild builds four mutants of one file into one build and runs each by its variable:
// each behaves as its mutant alone, without the variable the build behaves as the source does, and
// a change outside function bodies is left to a build of its own.
func TestSwitchedBuild(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testutil.MissingTool(t, "go is not on the PATH: the switched build is built with it")
	}
	root := t.TempDir()
	write := func(path, body string) string {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("calc/calc.go", original)
	write("calc/calc_test.go", probe)
	mutate := func(id, from, to string) Mutant {
		t.Helper()
		if !strings.Contains(original, from) {
			t.Fatalf("mutant %s: %q is not in the source", id, from)
		}
		return Mutant{ID: id, File: "calc/calc.go", Mutated: write("mut/"+id+".go", strings.Replace(original, from, to, 1))}
	}
	muts := []Mutant{
		mutate("1", "total += x", "total += 2 * x"),
		mutate("2", "b.v = v", "var zero T\n\tb.v = zero"),
		mutate("3", "\t\treturn a\n", "\t\treturn b\n"),
		mutate("4", "\t\ttotal += x\n", "\t\ttotal += x + 1\n"),
		mutate("5", "var limit = 3", "var limit = 4"),
	}
	out := t.TempDir()
	switched, skipped, err := Instrument(root, out, muts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "3", "4"}; !slices.Equal(switched, want) {
		t.Fatalf("switched %v, want %v (skipped %v)", switched, want, skipped)
	}
	if len(skipped) != 1 || skipped[0].ID != "5" || !strings.Contains(skipped[0].Reason, "not a function") {
		t.Fatalf("skipped %+v, want mutant 5 for a change outside functions", skipped)
	}
	bin := filepath.Join(out, "calc.test")
	build := exec.Command(goBin, "test", "-c", "-vet=off", "-overlay="+filepath.Join(out, "overlay.json"), "-o", bin, "./calc/")
	build.Dir = root
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the switched test binary: %v\n%s", err, b)
	}
	for id, want := range map[string]string{
		"":  "probe 6 x a 3",
		"1": "probe 12 x a 3",
		"2": "probe 6  a 3",
		"3": "probe 6 x b 3",
		"4": "probe 9 x a 3",
		"5": "probe 6 x a 3", // not in this build
	} {
		run := exec.Command(bin, "-test.run", "^TestProbe$", "-test.v")
		run.Dir = filepath.Join(root, "calc")
		run.Env = append(os.Environ(), Env+"="+id)
		b, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("mutant %q: %v\n%s", id, err, b)
		}
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("mutant %q printed\n%s\nwant %q", id, b, want)
		}
	}
}

func TestReadMutants(t *testing.T) {
	muts, err := readMutants(strings.NewReader("3\ta/b.go\t/tmp/x\n\n12\tc.go\t/tmp/y\n"))
	if err != nil || len(muts) != 2 || muts[1] != (Mutant{"12", "c.go", "/tmp/y"}) {
		t.Fatalf("readMutants: %+v, %v", muts, err)
	}
	if _, err := readMutants(strings.NewReader("x\ta.go\t/tmp/x\n")); err == nil || !strings.Contains(err.Error(), "numeric ID") {
		t.Fatalf("a bad line: %v", err)
	}
}
