package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// The races have teeth: run against adapters with one typical bug each, put in between the adapter
// and its DynamoDB client, the races meant to catch that bug find a broken guarantee.

// unconditional turns every conditional write into a blind overwrite: it rewrites the condition C
// into (C) OR (NOT (C)), which always holds and keeps every name and value of C in use, as the
// service requires. It is the adapter that lost its revision check.
type unconditional struct{ dynamo.API }

func (u unconditional) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c := aws.ToString(in.ConditionExpression); c != "" {
		blind := *in
		blind.ConditionExpression = aws.String(fmt.Sprintf("(%s) OR (NOT (%s))", c, c))
		in = &blind
	}
	return u.API.PutItem(ctx, in, optFns...)
}

// Attributes of the adapter's items that carry the ids of the writes that made them (docs/design.md).
var writeIDAttrs = []string{"wid", "wids"}

// forgetsOwnWrites hides from the adapter the write ids of every item it reads, so that after a
// lost response, or a retry that failed its condition on its own first attempt, it can never
// recognise its own write: the adapter without the resolution of ambiguous writes, which takes
// such a write for another's.
type forgetsOwnWrites struct{ dynamo.API }

func (f forgetsOwnWrites) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := f.API.GetItem(ctx, in, optFns...)
	if out != nil {
		out.Item = withoutWriteIDs(out.Item)
	}
	return out, err
}

func (f forgetsOwnWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := f.API.PutItem(ctx, in, optFns...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		ccf.Item = withoutWriteIDs(ccf.Item)
	}
	return out, err
}

func withoutWriteIDs(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	item = maps.Clone(item)
	for _, a := range writeIDAttrs {
		delete(item, a)
	}
	return item
}

// races are the race tests by name, with their default rounds.
var races = map[string]struct {
	run    func(t *testing.T, n *network, rounds int) *findings
	rounds int
}{
	"accepts":      {raceAccepts, acceptRounds},
	"lease":        {raceLease, leaseRounds},
	"linearizable": {raceLinearizable, linearizableRounds},
}

var mutants = []struct {
	name   string
	broken func(dynamo.API) dynamo.API
	caught []string // the races that must catch it
}{
	{"unconditional", func(api dynamo.API) dynamo.API { return unconditional{api} },
		[]string{"accepts", "lease", "linearizable"}},
	{"forgets-own-writes", func(api dynamo.API) dynamo.API { return forgetsOwnWrites{api} },
		[]string{"accepts", "lease", "linearizable"}},
}

// TestRacesCatchBrokenAdapters runs each race, at its default strength, against each broken
// adapter, and requires it to find a broken guarantee. The log says in how many rounds it did.
func TestRacesCatchBrokenAdapters(t *testing.T) {
	t.Parallel()
	for i, m := range mutants {
		for j, name := range m.caught {
			r := races[name]
			t.Run(m.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				n := newNetwork(t, uint64(100+10*i+j), m.broken)
				f := r.run(t, n, r.rounds)
				caught := f.brokenRounds()
				t.Logf("caught in %d of %d rounds; %s\n%s", caught, r.rounds, strings.Join(f.notes, "; "), f.summary())
				if caught == 0 {
					t.Fatalf("the %s race passed an adapter that is %s", name, m.name)
				}
			})
		}
	}
}

// TestUnconditionalWritesAreBlind checks the mutant itself against the server: a write based on a
// revision that is no longer stored, or on an absent item that exists, goes through it, where the
// adapter refuses it.
func TestUnconditionalWritesAreBlind(t *testing.T) {
	t.Parallel()
	ep := dynalitetest.Endpoint(t)
	table := dynalitetest.TableName(t)
	client := dynalitetest.NewClient(ep, nil)
	if _, err := dynamo.New(client, table).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	doc := func(rev, desired int64) *authority.Doc {
		return &authority.Doc{Key: authority.EnvKey("prod"), Rev: rev, Env: &authority.Env{Name: "prod", Desired: desired}}
	}
	good, blind := dynamo.New(client, table), dynamo.New(unconditional{client}, table)
	if _, err := good.Put(t.Context(), doc(0, 1)); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{0, 7} {
		if _, err := good.Put(t.Context(), doc(stale, 2)); !errors.Is(err, authority.ErrConflict) {
			t.Fatalf("the adapter wrote over revision 1 from revision %d: %v", stale, err)
		}
		if _, err := blind.Put(t.Context(), doc(stale, 2)); err != nil {
			t.Fatalf("the unconditional adapter refused a write from revision %d: %v", stale, err)
		}
	}
}
