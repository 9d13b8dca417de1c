package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// doctor runs `latestwins doctor` against the serve at addr, with the App's webhook secret in its
// variable, checking store.
func doctor(t *testing.T, f *fixture, addr, store string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "doctor", "--url", "http://"+addr, "--store", store, "--timeout", "30s")
	cmd.Env = append(f.environ(), "LATESTWINS_WEBHOOK_SECRET="+floodSecret)
	cmd.Dir = f.dir
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("latestwins doctor: %v", err)
	}
	return r
}

// doctorLine is doctor's line for check.
func doctorLine(r result, check string) string {
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == check {
			return l
		}
	}
	return ""
}

// doctor against a serve process on a DynamoDB store (dynalite): a migrated table passes; a table
// that is missing or was made without what migrate adds fails saying to run migrate; a store on a
// closed port fails saying what to check.
func TestDoctorDynamoStore(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t)
	cfg := f.path("latestwins.yml")
	if err := os.WriteFile(cfg, []byte(floodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, f, binPath, cfg)
	defer srv.stop(t) // before the test's context ends, which would kill it
	ep := dynalitetest.Endpoint(t)
	storeOf := func(table, endpoint string) string {
		return fmt.Sprintf("dynamodb://%s?region=us-east-1&endpoint=%s", table, url.QueryEscape(endpoint))
	}

	r := doctor(t, f, srv.addr, f.store)
	if r.code != 0 || !strings.Contains(doctorLine(r, "store"), "is migrated: schema version 2, index pending") {
		t.Errorf("doctor on the migrated table: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, check := range []string{"app", "webhook-secret", "webhook-signature", "audience"} {
		if l := doctorLine(r, check); !strings.HasPrefix(l, "ok ") {
			t.Errorf("%s: %q, want ok", check, l)
		}
	}

	old := dynalitetest.TableName(t)
	client := dynalitetest.Client(t)
	_, err := client.CreateTable(f.ctx, &dynamodb.CreateTableInput{TableName: aws.String(old), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}})
	if err != nil {
		t.Fatal(err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client)
	if err := waiter.Wait(f.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(old)}, procTimeout); err != nil {
		t.Fatal(err)
	}
	missing := dynalitetest.TableName(t)
	for _, c := range []struct{ table, says string }{
		{missing, "table " + missing + " needs migrating (there is no such table: migrate creates it)"},
		{old, "table " + old + " needs migrating (no index pending: migrate adds it; no schema version recorded: migrate records 2)"},
	} {
		store := storeOf(c.table, ep)
		r := doctor(t, f, srv.addr, store)
		l := doctorLine(r, "store")
		if r.code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, c.says) || !strings.Contains(l, "fix: run latestwins migrate --store '"+store+"'") {
			t.Errorf("doctor on %s: exit %d; store %q, want a failure saying %q and to migrate\n%s", c.table, r.code, l, c.says, r.stderr)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	r = doctor(t, f, srv.addr, storeOf(missing, closed))
	l := doctorLine(r, "store")
	if r.code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "connection refused") || !strings.Contains(l, "fix: check the endpoint and region") {
		t.Errorf("doctor on a closed port: exit %d; store %q\n%s", r.code, l, r.stderr)
	}
	if l := doctorLine(r, "app"); !strings.HasPrefix(l, "ok ") {
		t.Errorf("app: %q, want ok whatever the store", l)
	}
}
