package surfaces

import (
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// A job outside the environment's change window is refused with the gate's words, asked at the
// time of the request; inside it, approved.
func TestJudgeWaitsForTheChangeWindow(t *testing.T) {
	t.Parallel()
	const sha = "3333333ccccccccccccccccccccccccccccccccc"
	// A deny period every day, all day: closed whenever the test runs.
	closed, err := authority.ParseWindows("tz=UTC; deny=0 0 * * * for 24h")
	if err != nil {
		t.Fatal(err)
	}
	prod := &authority.Env{Name: "prod", Gates: &authority.Gates{Windows: closed},
		Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 2, Sha: sha}}}}
	if got := judge(prod, []string{"api"}, sha, nil); got.approve || !strings.Contains(got.comment, "prod/api: in a deny window until") {
		t.Fatalf("outside the change window: %+v; want a refusal saying so", got)
	}
	open, err := authority.ParseWindows("allow=* * * * * for 1m")
	if err != nil {
		t.Fatal(err)
	}
	prod.Gates.Windows = open
	if got := judge(prod, []string{"api"}, sha, nil); !got.approve {
		t.Fatalf("inside the change window: %+v; want it approved", got)
	}
}
