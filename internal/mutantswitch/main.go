// Command mutantswitch builds many mutants of the Go sources into one build, each switched on at run
// time, so that scripts/mutants compiles and links a test binary once for all the mutants its tests
// kill instead of once per mutant.
//
// It reads lines "ID<TAB>FILE<TAB>MUTATED" on stdin: a mutant's name (digits), the path of a Go file
// relative to -root, and the path of that file with the mutant applied. For each mutant that changes
// only the bodies of top-level functions, each changed function of FILE gets, at the top of its
// body, a guard that calls the mutated copy of itself when the variable latestwinsMutant holds the
// mutant's ID; the copies are appended to the file, and a file of the package sets the variable
// from LATESTWINS_MUTANT. Without the variable set, the build behaves as the sources do.
//
// It writes the instrumented files and a build overlay (go help build, -overlay) to -out, and prints
// the IDs it switched, one per line. A mutant it cannot switch (a change outside function bodies, a
// parameter without a name, a test file) is left out with a reason on stderr: scripts/mutants builds
// that one on its own.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Env is the variable that chooses the mutant of a switched build.
const Env = "LATESTWINS_MUTANT"

// switchVar is the package variable the guards compare.
const switchVar = "latestwinsMutant"

func main() {
	root := flag.String("root", ".", "the module's root: FILE paths are relative to it")
	out := flag.String("out", "", "the directory for the instrumented files and overlay.json")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "mutantswitch: -out DIR is required")
		os.Exit(2)
	}
	muts, err := readMutants(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutantswitch:", err)
		os.Exit(2)
	}
	switched, skipped, err := Instrument(*root, *out, muts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutantswitch:", err)
		os.Exit(1)
	}
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "mutantswitch: mutant %s is built on its own: %s\n", s.ID, s.Reason)
	}
	for _, id := range switched {
		fmt.Println(id)
	}
}

// Mutant is one mutated file.
type Mutant struct {
	ID      string
	File    string // relative to the root
	Mutated string // the file with the mutant applied
}

// Skip says why a mutant was not switched.
type Skip struct {
	ID     string
	Reason string
}

var idRE = regexp.MustCompile(`^[0-9]+$`)

func readMutants(r io.Reader) ([]Mutant, error) {
	var muts []Mutant
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 || !idRE.MatchString(f[0]) {
			return nil, fmt.Errorf("line %d: want ID<TAB>FILE<TAB>MUTATED with a numeric ID, got %q", n, sc.Text())
		}
		muts = append(muts, Mutant{ID: f[0], File: f[1], Mutated: f[2]})
	}
	return muts, sc.Err()
}

// Instrument writes the switched build of muts under out and returns the IDs it switched, in the
// order given, and the ones it left out.
func Instrument(root, out string, muts []Mutant) ([]string, []Skip, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	byFile := map[string][]Mutant{}
	var order []string
	for _, m := range muts {
		if _, ok := byFile[m.File]; !ok {
			order = append(order, m.File)
		}
		byFile[m.File] = append(byFile[m.File], m)
	}
	overlay := map[string]string{}
	packages := map[string]string{} // directory -> package name
	ok := map[string]bool{}
	var skipped []Skip
	for _, file := range order {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, nil, err
		}
		ins, err := newInstrumented(file, src)
		if err != nil {
			for _, m := range byFile[file] {
				skipped = append(skipped, Skip{m.ID, err.Error()})
			}
			continue
		}
		for _, m := range byFile[file] {
			mutated, err := os.ReadFile(m.Mutated)
			if err == nil {
				err = ins.add(m.ID, mutated)
			}
			if err != nil {
				skipped = append(skipped, Skip{m.ID, err.Error()})
				continue
			}
			ok[m.ID] = true
		}
		if len(ins.guards) == 0 {
			continue
		}
		dst := filepath.Join(out, "src", file)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(dst, ins.source(), 0o644); err != nil {
			return nil, nil, err
		}
		overlay[filepath.Join(root, file)] = dst
		packages[filepath.Dir(file)] = ins.pkg
	}
	for dir, pkg := range packages {
		dst := filepath.Join(out, "src", dir, "zz_latestwins_mutant.go")
		body := fmt.Sprintf("package %s\n\nimport \"os\"\n\n// %s names the mutant this build runs (%s); empty: none.\nvar %s = os.Getenv(%q)\n",
			pkg, switchVar, Env, switchVar, Env)
		if err := os.WriteFile(dst, []byte(body), 0o644); err != nil {
			return nil, nil, err
		}
		overlay[filepath.Join(root, dir, "zz_latestwins_mutant.go")] = dst
	}
	b, err := json.MarshalIndent(struct{ Replace map[string]string }{overlay}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "overlay.json"), b, 0o644); err != nil {
		return nil, nil, err
	}
	var switched []string
	for _, m := range muts {
		if ok[m.ID] {
			switched = append(switched, m.ID)
		}
	}
	return switched, skipped, nil
}

// instrumented is one source file and the guards and copies its switched mutants add.
type instrumented struct {
	src    []byte
	pkg    string
	fset   *token.FileSet
	decls  []ast.Decl
	guards map[int][]string // body offset (just past '{') -> guard statements
	copies []string
}

func newInstrumented(file string, src []byte) (*instrumented, error) {
	if strings.HasSuffix(file, "_test.go") {
		return nil, errors.New("a test file: its package is built only with its own tests")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return &instrumented{src: src, pkg: f.Name.Name, fset: fset, decls: f.Decls, guards: map[int][]string{}}, nil
}

// add switches the mutant id whose whole file is mutated.
func (in *instrumented) add(id string, mutated []byte) error {
	mset := token.NewFileSet()
	mf, err := parser.ParseFile(mset, "mutated.go", mutated, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("the mutated file does not parse: %w", err)
	}
	if mf.Name.Name != in.pkg || len(mf.Decls) != len(in.decls) {
		return errors.New("it adds or removes declarations")
	}
	text := func(fs *token.FileSet, src []byte, from, to token.Pos) string {
		return string(src[fs.Position(from).Offset:fs.Position(to).Offset])
	}
	type change struct{ orig, mut *ast.FuncDecl }
	var changes []change
	for i, d := range in.decls {
		md := mf.Decls[i]
		of, ok1 := d.(*ast.FuncDecl)
		mfd, ok2 := md.(*ast.FuncDecl)
		if ok1 != ok2 {
			return errors.New("it changes a declaration's kind")
		}
		if !ok1 {
			if text(in.fset, in.src, d.Pos(), d.End()) != text(mset, mutated, md.Pos(), md.End()) {
				return errors.New("it changes a declaration that is not a function")
			}
			continue
		}
		if of.Body == nil || mfd.Body == nil {
			if text(in.fset, in.src, d.Pos(), d.End()) != text(mset, mutated, md.Pos(), md.End()) {
				return errors.New("it changes a function without a body")
			}
			continue
		}
		if text(in.fset, in.src, of.Pos(), of.Body.Lbrace) != text(mset, mutated, mfd.Pos(), mfd.Body.Lbrace) {
			return fmt.Errorf("it changes the signature of %s", of.Name.Name)
		}
		if text(in.fset, in.src, of.Body.Lbrace, of.Body.End()) != text(mset, mutated, mfd.Body.Lbrace, mfd.Body.End()) {
			changes = append(changes, change{of, mfd})
		}
	}
	if len(changes) == 0 {
		return errors.New("it changes no function's body")
	}
	guards := map[int]string{}
	var copies []string
	for _, c := range changes {
		call, err := callOf(c.orig, "mutant"+id+"_"+c.orig.Name.Name)
		if err != nil {
			return err
		}
		stmt := "return " + call
		if c.orig.Type.Results == nil || len(c.orig.Type.Results.List) == 0 {
			stmt = call + "\n\t\treturn"
		}
		guards[in.fset.Position(c.orig.Body.Lbrace).Offset+1] = fmt.Sprintf("\n\tif %s == %q {\n\t\t%s\n\t}\n", switchVar, id, stmt)
		start := mset.Position(c.mut.Pos()).Offset
		name := mset.Position(c.mut.Name.Pos()).Offset
		end := mset.Position(c.mut.End()).Offset
		copies = append(copies, string(mutated[start:name])+"mutant"+id+"_"+c.mut.Name.Name+string(mutated[name+len(c.mut.Name.Name):end]))
	}
	for off, g := range guards {
		in.guards[off] = append(in.guards[off], g)
	}
	in.copies = append(in.copies, copies...)
	return nil
}

// callOf is the call of the function named name with fn's receiver, type parameters and
// parameters.
func callOf(fn *ast.FuncDecl, name string) (string, error) {
	if fn.Name.Name == "init" {
		return "", errors.New("it changes an init function, which nothing can call")
	}
	var b strings.Builder
	if fn.Recv != nil {
		r := fn.Recv.List[0]
		if len(r.Names) == 0 || r.Names[0].Name == "_" {
			return "", fmt.Errorf("%s's receiver has no name", fn.Name.Name)
		}
		b.WriteString(r.Names[0].Name + ".")
	}
	b.WriteString(name)
	if tp := fn.Type.TypeParams; tp != nil && len(tp.List) > 0 {
		var names []string
		for _, f := range tp.List {
			for _, n := range f.Names {
				names = append(names, n.Name)
			}
		}
		b.WriteString("[" + strings.Join(names, ", ") + "]")
	}
	var args []string
	for _, f := range fn.Type.Params.List {
		if len(f.Names) == 0 {
			return "", fmt.Errorf("a parameter of %s has no name", fn.Name.Name)
		}
		for _, n := range f.Names {
			if n.Name == "_" {
				return "", fmt.Errorf("a parameter of %s is _", fn.Name.Name)
			}
			a := n.Name
			if _, ok := f.Type.(*ast.Ellipsis); ok {
				a += "..."
			}
			args = append(args, a)
		}
	}
	b.WriteString("(" + strings.Join(args, ", ") + ")")
	return b.String(), nil
}

// source is the instrumented file.
func (in *instrumented) source() []byte {
	offs := make([]int, 0, len(in.guards))
	for off := range in.guards {
		offs = append(offs, off)
	}
	sort.Ints(offs)
	var b strings.Builder
	last := 0
	for _, off := range offs {
		b.Write(in.src[last:off])
		gs := append([]string(nil), in.guards[off]...)
		sort.Strings(gs)
		b.WriteString(strings.Join(gs, ""))
		last = off
	}
	b.Write(in.src[last:])
	for _, c := range in.copies {
		b.WriteString("\n\n" + c + "\n")
	}
	return []byte(b.String())
}
