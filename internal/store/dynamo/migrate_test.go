package dynamo

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// recordingAdmin records the administration calls Migrate makes and the writes it sends.
type recordingAdmin struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls []string
}

func (r *recordingAdmin) record(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, op)
}

func (r *recordingAdmin) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	r.record("CreateTable")
	return r.Client.CreateTable(ctx, in, optFns...)
}

func (r *recordingAdmin) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	r.record("UpdateTable")
	return r.Client.UpdateTable(ctx, in, optFns...)
}

func (r *recordingAdmin) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	r.record("UpdateTimeToLive")
	return r.Client.UpdateTimeToLive(ctx, in, optFns...)
}

func (r *recordingAdmin) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := r.Client.PutItem(ctx, in, optFns...)
	if err == nil {
		r.record("PutItem " + in.Item[attrPK].(*types.AttributeValueMemberS).Value)
	}
	return out, err
}

func (r *recordingAdmin) taken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func schemaVersion(t *testing.T, client *dynamodb.Client, table string) string {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: schemaKey}}})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("schema item %v has no numeric version", out.Item)
	}
	return n.Value
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client := dynalitetest.Client(t)
	table := dynalitetest.TableName(t)
	rec := &recordingAdmin{Client: client}
	s := New(rec, table)

	first, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &MigrateReport{Table: table, Created: true, TTL: TTLUnsupported, TTLDetail: "UnknownOperationException", SchemaVersion: 2, SchemaWritten: true}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("first migrate (-want +got):\n%s", diff)
	}
	if got := rec.taken(); !cmp.Equal(got, []string{"CreateTable", "UpdateTimeToLive", "PutItem meta#schema"}) {
		t.Fatalf("first migrate made %v", got)
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if m := desc.Table.BillingModeSummary; m == nil || m.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", m)
	}
	idx := findIndex(desc.Table, PendingIndex)
	if idx == nil || idx.Projection.ProjectionType != types.ProjectionTypeKeysOnly || checkIndex(idx) != nil {
		t.Fatalf("index %s: %+v; want keys pending/pk, KEYS_ONLY", PendingIndex, idx)
	}

	// Data written between the runs survives the second run, which writes nothing.
	if _, err := s.Put(ctx, &authority.Doc{Key: authority.EnvKey("staging"), Pending: true, Env: &authority.Env{Name: "staging", Desired: 3}}); err != nil {
		t.Fatal(err)
	}
	rec.taken()
	second, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = &MigrateReport{Table: table, TTL: TTLUnsupported, TTLDetail: "UnknownOperationException", SchemaVersion: 2}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Fatalf("second migrate (-want +got):\n%s", diff)
	}
	// The TTL call is repeated (the server cannot say it is on), nothing else changes anything.
	if got := rec.taken(); !cmp.Equal(got, []string{"UpdateTimeToLive"}) {
		t.Fatalf("second migrate made %v; want no change to the table or its items", got)
	}
	if d, err := s.Get(ctx, authority.EnvKey("staging")); err != nil || d.Rev != 1 || d.Env.Desired != 3 {
		t.Fatalf("after the second migrate: %+v, %v", d, err)
	}
	if p, err := s.Pending(ctx); err != nil || !cmp.Equal(p, []string{"staging"}) {
		t.Fatalf("pending after the second migrate: %v, %v", p, err)
	}
	if v := schemaVersion(t, client, table); v != "2" {
		t.Fatalf("schema version %s, want 2", v)
	}
	if got := second.String(); !strings.Contains(got, "up to date") || !strings.Contains(got, "schema version 2") {
		t.Errorf("report reads %q", got)
	}
}

func TestMigrateNeverLowersTheSchemaVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	for _, tc := range []struct{ stored, want string }{{"7", "7"}, {"0", "2"}, {"1", "2"}} {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: schemaKey}, attrVersion: &types.AttributeValueMemberN{Value: tc.stored}}}); err != nil {
			t.Fatal(err)
		}
		rep, err := New(client, table).Migrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := schemaVersion(t, client, table); v != tc.want || rep.SchemaWritten != (tc.stored != tc.want) {
			t.Fatalf("stored version %s: after migrate %s (report %+v); want %s", tc.stored, v, rep, tc.want)
		}
		if tc.stored == "7" && (rep.SchemaVersion != 7 || !strings.Contains(rep.String(), "newer than this build")) {
			t.Fatalf("report of a newer schema: %+v %q", rep, rep)
		}
	}
}

// onlineIndexes stands in for DynamoDB's online index creation, which dynalite validates but does
// not perform: once UpdateTable asked for an index, DescribeTable shows it CREATING, then ACTIVE.
// The request goes to dynalite for validation on a provisioned table only: dynalite's validator
// predates on-demand billing and demands index throughput, which DynamoDB refuses on such tables.
type onlineIndexes struct {
	*dynamodb.Client
	mu        sync.Mutex
	requested *types.CreateGlobalSecondaryIndexAction
	attrs     []types.AttributeDefinition
	describes int
}

func (o *onlineIndexes) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	out, err := &dynamodb.UpdateTableOutput{}, error(nil)
	if in.GlobalSecondaryIndexUpdates[0].Create.ProvisionedThroughput != nil {
		out, err = o.Client.UpdateTable(ctx, in, optFns...)
	}
	if err == nil && len(in.GlobalSecondaryIndexUpdates) == 1 {
		o.mu.Lock()
		o.requested, o.attrs = in.GlobalSecondaryIndexUpdates[0].Create, in.AttributeDefinitions
		o.mu.Unlock()
	}
	return out, err
}

func (o *onlineIndexes) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := o.Client.DescribeTable(ctx, in, optFns...)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil || o.requested == nil {
		return out, err
	}
	o.describes++
	status := types.IndexStatusCreating
	if o.describes > 2 {
		status = types.IndexStatusActive
	}
	out.Table.GlobalSecondaryIndexes = append(out.Table.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
		IndexName: o.requested.IndexName, KeySchema: o.requested.KeySchema, Projection: o.requested.Projection, IndexStatus: status})
	return out, nil
}

func createTable(t *testing.T, client *dynamodb.Client, table string, keys []types.KeySchemaElement, attrs []types.AttributeDefinition, provisioned bool, gsis ...types.GlobalSecondaryIndex) {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: aws.String(table), KeySchema: keys, AttributeDefinitions: attrs,
		BillingMode: types.BillingModePayPerRequest, GlobalSecondaryIndexes: gsis}
	if provisioned {
		in.BillingMode = types.BillingModeProvisioned
		in.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(3)}
	}
	if _, err := client.CreateTable(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func hashKey(name string) []types.KeySchemaElement {
	return []types.KeySchemaElement{{AttributeName: aws.String(name), KeyType: types.KeyTypeHash}}
}

func stringAttrs(names ...string) []types.AttributeDefinition {
	var out []types.AttributeDefinition
	for _, n := range names {
		out = append(out, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
	}
	return out
}

func TestMigrateAddsTheIndex(t *testing.T) {
	t.Parallel()
	for _, provisioned := range []bool{false, true} {
		ctx := t.Context()
		client := dynalitetest.Client(t)
		table := dynalitetest.TableName(t)
		createTable(t, client, table, hashKey(attrPK), stringAttrs(attrPK), provisioned)
		plain := New(client, table)
		if _, err := plain.Put(ctx, &authority.Doc{Key: authority.EnvKey("staging"), Pending: true, Env: &authority.Env{Name: "staging", Desired: 4}}); err != nil {
			t.Fatal(err)
		}

		online := &onlineIndexes{Client: client}
		rep, err := New(client, table, WithAdmin(online, client)).Migrate(ctx)
		if err != nil {
			t.Fatalf("provisioned %v: %v", provisioned, err)
		}
		if rep.Created || !rep.IndexAdded || rep.SchemaVersion != 2 {
			t.Fatalf("provisioned %v: report %+v; want the index added to the existing table", provisioned, rep)
		}
		req := online.requested
		if req == nil || aws.ToString(req.IndexName) != PendingIndex || req.Projection.ProjectionType != types.ProjectionTypeKeysOnly ||
			checkIndex(&types.GlobalSecondaryIndexDescription{KeySchema: req.KeySchema}) != nil {
			t.Fatalf("provisioned %v: requested index %+v", provisioned, req)
		}
		if attrType(online.attrs, attrPending) != types.ScalarAttributeTypeS {
			t.Errorf("provisioned %v: attribute definitions %v lack pending (S)", provisioned, online.attrs)
		}
		if got := req.ProvisionedThroughput; provisioned != (got != nil) ||
			(provisioned && (aws.ToInt64(got.ReadCapacityUnits) != 5 || aws.ToInt64(got.WriteCapacityUnits) != 3)) {
			t.Errorf("provisioned %v: index throughput %+v; want the table's on a provisioned table, none on demand", provisioned, got)
		}
		if online.describes < 3 {
			t.Errorf("provisioned %v: Migrate returned before the index was ACTIVE", provisioned)
		}
		if d, err := plain.Get(ctx, authority.EnvKey("staging")); err != nil || d.Env.Desired != 4 || !d.Pending {
			t.Fatalf("provisioned %v: data after the upgrade: %+v, %v", provisioned, d, err)
		}
	}
}

func TestMigrateWhenTheServerDoesNotBuildTheIndex(t *testing.T) {
	t.Parallel()
	client := dynalitetest.Client(t)
	table := dynalitetest.TableName(t)
	createTable(t, client, table, hashKey(attrPK), stringAttrs(attrPK), true)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := New(client, table).Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "did not create it") {
		t.Fatalf("Migrate where UpdateTable builds no index: %v; want an error that says so", err)
	}
}

func TestMigrateRefusesAnotherKeySchema(t *testing.T) {
	t.Parallel()
	client := dynalitetest.Client(t)
	wrongIndex := types.GlobalSecondaryIndex{IndexName: aws.String(PendingIndex), KeySchema: hashKey(attrPending),
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}
	for _, tc := range []struct {
		name  string
		keys  []types.KeySchemaElement
		attrs []types.AttributeDefinition
		gsis  []types.GlobalSecondaryIndex
		want  string
	}{
		{"other hash key", hashKey("id"), stringAttrs("id"), nil, `key schema is [id HASH (S)]`},
		{"sort key", append(hashKey(attrPK), types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}),
			stringAttrs(attrPK, "sk"), nil, `key schema is [pk HASH (S), sk RANGE (S)]`},
		{"numeric pk", hashKey(attrPK), []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeN}},
			nil, `key schema is [pk HASH (N)]`},
		{"index with other keys", hashKey(attrPK), stringAttrs(attrPK, attrPending), []types.GlobalSecondaryIndex{wrongIndex},
			`index pending has key schema [pending HASH]`},
	} {
		table := dynalitetest.TableName(t)
		createTable(t, client, table, tc.keys, tc.attrs, false, tc.gsis...)
		rec := &recordingAdmin{Client: client}
		_, err := New(rec, table).Migrate(t.Context())
		if err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Migrate = %v; want an error naming %s and %q", tc.name, err, table, tc.want)
		}
		if got := rec.taken(); len(got) != 0 {
			t.Errorf("%s: Migrate changed %v on a table it refused", tc.name, got)
		}
	}
}

// ttlServer is a TTLAdmin with DynamoDB's behaviour: one TTL attribute per table, enabling it
// twice is an error.
type ttlServer struct {
	mu      sync.Mutex
	status  types.TimeToLiveStatus
	attr    string
	updates int
}

func (s *ttlServer) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &types.TimeToLiveDescription{TimeToLiveStatus: s.status}
	if s.attr != "" {
		d.AttributeName = aws.String(s.attr)
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

func (s *ttlServer) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	if s.status != types.TimeToLiveStatusDisabled {
		return nil, &smithyValidation{"TimeToLive is already enabled"}
	}
	s.status, s.attr = types.TimeToLiveStatusEnabled, aws.ToString(in.TimeToLiveSpecification.AttributeName)
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: in.TimeToLiveSpecification}, nil
}

type smithyValidation struct{ msg string }

func (e *smithyValidation) Error() string { return "ValidationException: " + e.msg }

func TestMigrateEnablesTimeToLiveOnce(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	ttl := &ttlServer{status: types.TimeToLiveStatusDisabled}
	s := New(client, table, WithAdmin(client, ttl))
	first, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first.TTL != TTLEnabling || !first.TTLChanged || second.TTL != TTLEnabled || second.TTLChanged || ttl.updates != 1 || ttl.attr != TTLAttribute {
		t.Fatalf("reports %+v then %+v, %d updates on %q; want TTL turned on once on %s", first, second, ttl.updates, ttl.attr, TTLAttribute)
	}

	other := &ttlServer{status: types.TimeToLiveStatusEnabled, attr: "ttl"}
	_, err = New(client, table, WithAdmin(client, other)).Migrate(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"ttl"`) || other.updates != 0 {
		t.Fatalf("Migrate with TTL on another attribute: %v (%d updates); want an error naming it", err, other.updates)
	}
}

func TestMigrateNeedsAdministration(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	_, err := New(&pagedQueries{API: client}, table).Migrate(t.Context())
	if err == nil || !strings.Contains(err.Error(), "WithAdmin") {
		t.Fatalf("Migrate over an API without table administration: %v", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	client := dynalitetest.Client(t)
	table := dynalitetest.TableName(t)
	var wg sync.WaitGroup
	reports := make([]*MigrateReport, 4)
	for i := range reports {
		wg.Go(func() {
			rep, err := New(client, table).Migrate(t.Context())
			if err != nil {
				t.Errorf("migrate %d: %v", i, err)
			}
			reports[i] = rep
		})
	}
	wg.Wait()
	created, written := 0, 0
	for _, r := range reports {
		if r == nil {
			t.FailNow()
		}
		if r.Created {
			created++
		}
		if r.SchemaWritten {
			written++
		}
	}
	if created != 1 || written != 1 {
		t.Fatalf("4 concurrent migrations: %d created the table, %d wrote the schema version; want exactly one each", created, written)
	}
}
