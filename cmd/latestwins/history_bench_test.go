package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// trafficCounter is an HTTP proxy on loopback between latestwins processes and dynalite that counts
// the requests of each DynamoDB operation and the bytes of the write requests' bodies.
type trafficCounter struct {
	URL string
	mu  sync.Mutex
	ops map[string]int
	wr  int64 // bytes of PutItem and BatchWriteItem bodies
}

func newTrafficCounter(tb testing.TB, target string) *trafficCounter {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	c := &trafficCounter{ops: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		c.mu.Lock()
		c.ops[op]++
		if op == "PutItem" || op == "BatchWriteItem" {
			c.wr += int64(len(body))
		}
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	c.URL = "http://" + ln.Addr().String()
	return c
}

// take returns the counts since the last take and resets them.
func (c *trafficCounter) take() (requests int, written int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.ops {
		requests += n
	}
	written = c.wr
	c.ops, c.wr = map[string]int{}, 0
	return requests, written
}

// benchDepths are the history lengths BenchmarkHistoryDepth measures at: LATESTWINS_BENCH_HISTORY
// (comma-separated), by default 0 and 1,000 prior passes (docs/benchmarks.md adds 10,000).
func benchDepths(tb testing.TB) []int {
	raw := os.Getenv("LATESTWINS_BENCH_HISTORY")
	if raw == "" {
		raw = "0,1000"
	}
	var out []int
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			tb.Fatalf("LATESTWINS_BENCH_HISTORY=%q: give numbers of passes such as 0,1000,10000", raw)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkHistoryDepth runs whole passes as `latestwins` processes (claim, gate deploy, complete:
// the Action's steps) against dynalite, on environments with 0, 1,000 (and, with
// LATESTWINS_BENCH_HISTORY, 10,000) prior passes, and reports per depth and phase the median
// latency, the DynamoDB requests and the bytes written, and the size of each environment's document.
// The environments share one table and their passes alternate within every iteration, so that the
// machine's load and the table's size weigh on every depth alike; the history is made in-process
// beforehand, and only the timed passes run as processes.
func BenchmarkHistoryDepth(b *testing.B) {
	ep := dynalitetest.Endpoint(b)
	ctx := b.Context()
	depths := benchDepths(b)
	table := dynalitetest.TableName(b)
	proxy := newTrafficCounter(b, ep)
	f := newFixture(b, fmt.Sprintf("dynamodb://%s?region=us-east-1&endpoint=%s", table, url.QueryEscape(proxy.URL)))
	client := dynalitetest.NewClient(ep, nil)
	a := authority.New(dynamo.New(client, table))
	envOf := func(depth int) string { return fmt.Sprintf("prod-%d", depth) }
	for _, depth := range depths {
		for i := range depth {
			if err := seedPass(ctx, a, envOf(depth), i); err != nil {
				b.Fatal(err)
			}
		}
	}
	proxy.take()
	phases := []string{"claim", "gate", "complete"}
	type key struct {
		depth int
		phase string
	}
	lat := map[key][]time.Duration{}
	reqs, bytes := map[key]int{}, map[key]int64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, depth := range depths {
			env := envOf(depth)
			state := f.path(env + ".json")
			id := depth + i
			args := map[string][]string{
				"claim": {"claim", "--environment", env, "--scopes", "api", "--sha", fmt.Sprintf("%040x", id+1), "--ref", "refs/heads/main",
					"--intent-id", fmt.Sprintf("run-%d", id), "--state", state},
				"gate":     {"gate", "--state", state, "--phase", "deploy", "--holder", fmt.Sprintf("run-%d/1", id)},
				"complete": {"complete", "--state", state, "--outcome", "success"},
			}
			for _, ph := range phases {
				start := time.Now()
				r := f.run(args[ph]...)
				k := key{depth, ph}
				lat[k] = append(lat[k], time.Since(start))
				if r.code != 0 {
					b.Fatalf("%s on %s: exit %d\n%s%s", ph, env, r.code, r.stdout, r.stderr)
				}
				n, w := proxy.take()
				reqs[k] += n
				bytes[k] += w
			}
		}
	}
	b.StopTimer()
	for _, depth := range depths {
		var passBytes int64
		prefix := fmt.Sprintf("d%d-", depth)
		for _, ph := range phases {
			k := key{depth, ph}
			times := lat[k]
			sortDurations(times)
			b.ReportMetric(float64(percentile(times, 50))/float64(time.Millisecond), prefix+ph+"-ms")
			b.ReportMetric(float64(reqs[k])/float64(b.N), prefix+ph+"-req")
			b.ReportMetric(float64(bytes[k])/float64(b.N), prefix+ph+"-B")
			passBytes += bytes[k]
		}
		b.ReportMetric(float64(passBytes)/float64(b.N), prefix+"pass-B")
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: authority.EnvKey(envOf(depth))}}})
		if err != nil {
			b.Fatal(err)
		}
		if hot, ok := out.Item["hot"].(*types.AttributeValueMemberS); ok {
			b.ReportMetric(float64(len(hot.Value)), prefix+"item-B")
		}
	}
}

// seedPass runs pass i of the history in-process: accept and claim, gate deploy, complete.
func seedPass(ctx context.Context, a *authority.Authority, env string, i int) error {
	res, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("seed-%d", i), Environment: env, Scopes: []string{"api"},
		Sha: fmt.Sprintf("%040x", 1_000_000+i), Ref: "refs/heads/main", Source: "push example/api", Actor: "octocat"}, true)
	if err != nil {
		return err
	}
	holder := fmt.Sprintf("seed-%d/1", i)
	g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: holder, LeaseTTL: time.Minute})
	if err != nil {
		return err
	}
	_, err = a.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
	return err
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
