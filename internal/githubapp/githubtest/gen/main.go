// Command gen trims GitHub's published REST API description to the operations latestwins calls.
//
// It reads the full description (api.github.com.json from the npm package @octokit/openapi), keeps the
// operations listed by githubapp.Endpoints and every component they reference, directly or through
// other components, and writes the result as indented JSON with sorted keys, so that a regeneration
// from the same package version is byte-identical. scripts/gen-openapi-testdata runs it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/latestwins/latestwins/internal/githubapp"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the full description (generated/api.github.com.json of @octokit/openapi)")
	out := fs.String("out", "", "where to write the trimmed description")
	source := fs.String("source", "", "the package and version the description came from, recorded in info.description")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("both -in and -out are required")
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("read description: %w", err)
	}
	trimmed, err := trim(raw, githubapp.Endpoints(), *source)
	if err != nil {
		return fmt.Errorf("trim %s: %w", *in, err)
	}
	if err := os.WriteFile(*out, trimmed, 0o644); err != nil {
		return fmt.Errorf("write trimmed description: %w", err)
	}
	fmt.Fprintf(stderr, "gen: wrote %s (%d bytes, %d operations)\n", *out, len(trimmed), len(githubapp.Endpoints()))
	return nil
}

type object = map[string]any

// trim returns the description holding only the given operations and the components they reference.
func trim(raw []byte, endpoints []githubapp.Endpoint, source string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc object
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	paths, ok := doc["paths"].(object)
	if !ok {
		return nil, errors.New("no paths object")
	}
	components, _ := doc["components"].(object)

	keptPaths := object{}
	for _, e := range endpoints {
		item, ok := paths[e.Path].(object)
		if !ok {
			return nil, fmt.Errorf("path %s is not in the description: fix githubapp.Endpoints", e.Path)
		}
		method := strings.ToLower(e.Method)
		op, ok := item[method].(object)
		if !ok {
			return nil, fmt.Errorf("%s %s is not in the description: fix githubapp.Endpoints", e.Method, e.Path)
		}
		kept, _ := keptPaths[e.Path].(object)
		if kept == nil {
			kept = object{}
			for _, shared := range []string{"parameters", "summary", "description", "servers"} {
				if v, ok := item[shared]; ok {
					kept[shared] = v
				}
			}
			keptPaths[e.Path] = kept
		}
		kept[method] = op
	}

	keptComponents := object{}
	var visit func(v any) error
	visit = func(v any) error {
		switch v := v.(type) {
		case object:
			if ref, ok := v["$ref"].(string); ok {
				if err := keep(ref, components, keptComponents, visit); err != nil {
					return err
				}
			}
			for _, child := range v {
				if err := visit(child); err != nil {
					return err
				}
			}
		case []any:
			for _, child := range v {
				if err := visit(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := visit(keptPaths); err != nil {
		return nil, err
	}

	out := object{"openapi": doc["openapi"], "paths": keptPaths, "components": keptComponents}
	for _, k := range []string{"servers", "externalDocs"} {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	info, _ := doc["info"].(object)
	if info == nil {
		info = object{}
	}
	note := "Trimmed to the operations latestwins calls (githubapp.Endpoints) by scripts/gen-openapi-testdata"
	if source != "" {
		note += " from " + source
	}
	info["description"] = note + "."
	out["info"] = info

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}

// keep copies the component ref names (#/components/KIND/NAME) into kept and visits it once.
func keep(ref string, components, kept object, visit func(any) error) error {
	rest, ok := strings.CutPrefix(ref, "#/components/")
	if !ok {
		return fmt.Errorf("reference %q does not point into #/components: the trimmer only follows local component references", ref)
	}
	kind, name, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("reference %q is not of the form #/components/KIND/NAME", ref)
	}
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	all, _ := components[kind].(object)
	v, ok := all[name]
	if !ok {
		return fmt.Errorf("reference %q names a missing component", ref)
	}
	dst, _ := kept[kind].(object)
	if dst == nil {
		dst = object{}
		kept[kind] = dst
	}
	if _, seen := dst[name]; seen {
		return nil
	}
	dst[name] = v
	return visit(v)
}
