package config

import (
	"os"
	"testing"
	"time"
)

// The gates example of docs/config.md parses, with each of its three gates.
func TestDocumentedGatesParse(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(docBlock(t, b, "## Gates: soak time, approvals and change windows"))
	if err != nil {
		t.Fatalf("the documented gates do not parse: %v", err)
	}
	var prod *Environment
	for i := range cfg.Environments {
		if cfg.Environments[i].Name == "production" {
			prod = &cfg.Environments[i]
		}
	}
	if prod == nil {
		t.Fatal("the documented gates have no production")
	}
	g := prod.GatesOf()
	if g.Soak.For != 30*time.Minute || g.Approvals.Count != 1 || g.Windows.Timezone != "Europe/Berlin" || len(g.Windows.Allow) != 1 || len(g.Windows.Deny) != 1 {
		t.Fatalf("production's gates as documented: soak %+v, approvals %+v, windows %+v", g.Soak, g.Approvals, g.Windows)
	}
}
