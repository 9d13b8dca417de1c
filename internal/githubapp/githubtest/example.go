package githubtest

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// Example returns a fresh copy of the example GitHub documents for the answer status to method on the
// path template (as GitHub spells it, /repos/{owner}/{repo}/check-runs), for a test to adjust and
// stub. name picks one of several examples (such as response-if-content-is-a-file); empty takes the
// first by name. Examples of a JSON array are not objects: build those from an element's example.
func Example(t testing.TB, method, path string, status int, name string) map[string]any {
	t.Helper()
	doc, err := Description()
	if err != nil {
		t.Fatalf("githubtest: %v", err)
	}
	item := doc.Paths.Value(path)
	if item == nil {
		t.Fatalf("githubtest: Example: %s is not a path of %s", path, DescriptionPath)
	}
	op := item.GetOperation(strings.ToUpper(method))
	if op == nil {
		t.Fatalf("githubtest: Example: %s %s is not an operation of %s", method, path, DescriptionPath)
	}
	resp := op.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		t.Fatalf("githubtest: Example: %s %s documents no %d answer", method, path, status)
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil {
		t.Fatalf("githubtest: Example: %s %s documents no JSON body for %d", method, path, status)
	}
	names := make([]string, 0, len(media.Examples))
	for n := range media.Examples {
		names = append(names, n)
	}
	sort.Strings(names)
	if name == "" && len(names) > 0 {
		name = names[0]
	}
	ex := media.Examples[name]
	if ex == nil || ex.Value == nil {
		t.Fatalf("githubtest: Example: %s %s has no example %q for %d (it has %v)", method, path, name, status, names)
	}
	raw, err := json.Marshal(ex.Value.Value)
	if err != nil {
		t.Fatalf("githubtest: Example: encode %q: %v", name, err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("githubtest: Example: decode %q: %v", name, err)
	}
	if media.Schema != nil && media.Schema.Value != nil {
		if err := media.Schema.Value.VisitJSON(v); err != nil {
			t.Fatalf("githubtest: Example: GitHub's example %q for %s %s %d does not match its own schema, so the fake would refuse it; write the body by hand: %v", name, method, path, status, err)
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("githubtest: Example: %s %s example %q is not a JSON object: %v", method, path, name, err)
	}
	return obj
}
