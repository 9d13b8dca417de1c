package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TableAdmin creates and inspects the table. *dynamodb.Client satisfies it.
type TableAdmin interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// TTLAdmin reads and enables the table's time to live. *dynamodb.Client satisfies it.
type TTLAdmin interface {
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var (
	_ TableAdmin = (*dynamodb.Client)(nil)
	_ TTLAdmin   = (*dynamodb.Client)(nil)
)

const (
	// TTLAttribute is the attribute DynamoDB expires items by: epoch seconds, on items that are
	// meant to go away (delivery dedupe records), never on documents.
	TTLAttribute = "expires_at_epoch"
	// SchemaVersion is the table layout this package writes and reads.
	SchemaVersion int64 = 2

	schemaKey   = "meta#schema"
	attrVersion = "version"
)

// TTLStatus says what Migrate found or did about time to live.
type TTLStatus string

// TTL states in a MigrateReport.
const (
	TTLEnabled     TTLStatus = "enabled"
	TTLEnabling    TTLStatus = "enabling"
	TTLUnsupported TTLStatus = "not supported by this server"
)

// MigrateReport says what Migrate found and changed.
type MigrateReport struct {
	Table         string    `json:"table"`
	Created       bool      `json:"created"`        // the table was created by this run
	IndexAdded    bool      `json:"index_added"`    // the pending index was added to an existing table
	TTL           TTLStatus `json:"ttl"`            // time to live on TTLAttribute
	TTLChanged    bool      `json:"ttl_changed"`    // this run turned time to live on
	TTLDetail     string    `json:"ttl_detail"`     // the server's answer when TTL is unsupported
	SchemaVersion int64     `json:"schema_version"` // the stored schema version after the run
	SchemaWritten bool      `json:"schema_written"` // this run wrote the schema version
}

// String renders the report for people.
func (r *MigrateReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s: ", r.Table)
	switch {
	case r.Created:
		b.WriteString("created")
	case r.IndexAdded:
		b.WriteString("index " + PendingIndex + " added")
	default:
		b.WriteString("up to date")
	}
	fmt.Fprintf(&b, "; ttl on %s: %s", TTLAttribute, r.TTL)
	if r.TTLDetail != "" {
		fmt.Fprintf(&b, " (%s)", r.TTLDetail)
	}
	fmt.Fprintf(&b, "; schema version %d", r.SchemaVersion)
	if r.SchemaVersion > SchemaVersion {
		fmt.Fprintf(&b, " (newer than this build's %d)", SchemaVersion)
	}
	return b.String()
}

// Migrate creates the table when it is absent (on-demand billing, with the pending index), adds the
// pending index to a table that lacks it, enables time to live on TTLAttribute, and records the
// schema version without ever lowering it. Running it again changes nothing. A table with another
// key schema is an error that says what is wrong; nothing is changed then.
func (s *Store) Migrate(ctx context.Context) (*MigrateReport, error) {
	if s.tables == nil || s.ttl == nil {
		return nil, fmt.Errorf("migrate table %s: the client given to the store cannot administer tables (pass a *dynamodb.Client, or use WithAdmin)", s.table)
	}
	rep := &MigrateReport{Table: s.table}
	desc, err := s.describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
	}
	if desc == nil {
		if rep.Created, err = s.create(ctx); err != nil {
			return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
		}
	}
	if desc, err = s.waitActive(ctx); err != nil {
		return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
	}
	if err := checkKeySchema(desc); err != nil {
		return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
	}
	if idx := findIndex(desc, PendingIndex); idx != nil {
		if err := checkIndex(idx); err != nil {
			return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
		}
	} else {
		if rep.IndexAdded, err = s.addIndex(ctx, desc); err != nil {
			return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
		}
		if desc, err = s.waitActive(ctx); err != nil {
			return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
		}
		idx := findIndex(desc, PendingIndex)
		if idx == nil {
			return nil, fmt.Errorf("migrate table %s: the server accepted the request to add index %s but did not create it (a local server without online index creation? create the table afresh with migrate)", s.table, PendingIndex)
		}
		if err := checkIndex(idx); err != nil {
			return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
		}
	}
	if err := s.enableTTL(ctx, rep); err != nil {
		return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
	}
	if err := s.writeSchema(ctx, rep); err != nil {
		return nil, fmt.Errorf("migrate table %s: %w", s.table, err)
	}
	return rep, nil
}

// describe returns the table's description, or nil when there is no such table.
func (s *Store) describe(ctx context.Context) (*types.TableDescription, error) {
	out, err := s.tables.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe table: %w", err)
	}
	return out.Table, nil
}

// create creates the table; it reports false when another process created it first.
func (s *Store) create(ctx context.Context) (bool, error) {
	_, err := s.tables.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(s.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrPending), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema:              []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{pendingIndex(nil)},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create table: %w", err)
	}
	return true, nil
}

func pendingIndex(throughput *types.ProvisionedThroughput) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(PendingIndex),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPending), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeRange},
		},
		Projection:            &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		ProvisionedThroughput: throughput,
	}
}

// addIndex starts building the pending index on an existing table; the items stay where they are
// and the index is backfilled from them. It reports false when another process added it first.
func (s *Store) addIndex(ctx context.Context, desc *types.TableDescription) (bool, error) {
	var throughput *types.ProvisionedThroughput
	if desc.BillingModeSummary == nil || desc.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		rcu, wcu := int64(1), int64(1)
		if p := desc.ProvisionedThroughput; p != nil {
			rcu, wcu = max(rcu, aws.ToInt64(p.ReadCapacityUnits)), max(wcu, aws.ToInt64(p.WriteCapacityUnits))
		}
		throughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(rcu), WriteCapacityUnits: aws.Int64(wcu)}
	}
	idx := pendingIndex(throughput)
	_, err := s.tables.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(s.table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrPending), AttributeType: types.ScalarAttributeTypeS},
		},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName: idx.IndexName, KeySchema: idx.KeySchema, Projection: idx.Projection, ProvisionedThroughput: idx.ProvisionedThroughput,
		}}},
	})
	if err != nil {
		// Another migrate may have added it meanwhile: then the index is there now.
		if now, derr := s.describe(ctx); derr == nil && now != nil && findIndex(now, PendingIndex) != nil {
			return false, nil
		}
		return false, fmt.Errorf("add index %s: %w", PendingIndex, err)
	}
	return true, nil
}

// waitActive polls until the table and its indexes are ACTIVE, within ctx.
func (s *Store) waitActive(ctx context.Context) (*types.TableDescription, error) {
	delay := 20 * time.Millisecond
	for {
		desc, err := s.describe(ctx)
		if err != nil {
			return nil, err
		}
		if desc == nil {
			return nil, errors.New("table not found after creating it")
		}
		status, ready := string(desc.TableStatus), desc.TableStatus == types.TableStatusActive
		for _, idx := range desc.GlobalSecondaryIndexes {
			if idx.IndexStatus != types.IndexStatusActive {
				status, ready = fmt.Sprintf("index %s %s", aws.ToString(idx.IndexName), idx.IndexStatus), false
			}
		}
		switch desc.TableStatus {
		case types.TableStatusDeleting, types.TableStatusArchiving, types.TableStatusArchived,
			types.TableStatusInaccessibleEncryptionCredentials:
			return nil, fmt.Errorf("table is %s", desc.TableStatus)
		}
		if ready {
			return desc, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the table to become ACTIVE (now %s): %w", status, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// checkKeySchema requires a string partition key pk and no sort key.
func checkKeySchema(desc *types.TableDescription) error {
	ok := len(desc.KeySchema) == 1 && aws.ToString(desc.KeySchema[0].AttributeName) == attrPK &&
		desc.KeySchema[0].KeyType == types.KeyTypeHash && attrType(desc.AttributeDefinitions, attrPK) == types.ScalarAttributeTypeS
	if ok {
		return nil
	}
	return fmt.Errorf("the table's key schema is %s; latestwins needs a partition key %q of type S and no sort key: choose another table name, or let migrate create the table",
		keySchema(desc.KeySchema, desc.AttributeDefinitions), attrPK)
}

// checkIndex requires the pending index to be keyed by pending (hash) and pk (range). Any
// projection will do: every projection carries the keys.
func checkIndex(idx *types.GlobalSecondaryIndexDescription) error {
	k := idx.KeySchema
	if len(k) == 2 && aws.ToString(k[0].AttributeName) == attrPending && k[0].KeyType == types.KeyTypeHash &&
		aws.ToString(k[1].AttributeName) == attrPK && k[1].KeyType == types.KeyTypeRange {
		return nil
	}
	return fmt.Errorf("index %s has key schema %s; latestwins needs hash key %q and range key %q: delete the index and run migrate again",
		PendingIndex, keySchema(k, nil), attrPending, attrPK)
}

func findIndex(desc *types.TableDescription, name string) *types.GlobalSecondaryIndexDescription {
	for i := range desc.GlobalSecondaryIndexes {
		if aws.ToString(desc.GlobalSecondaryIndexes[i].IndexName) == name {
			return &desc.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

func attrType(defs []types.AttributeDefinition, name string) types.ScalarAttributeType {
	for _, d := range defs {
		if aws.ToString(d.AttributeName) == name {
			return d.AttributeType
		}
	}
	return ""
}

func keySchema(k []types.KeySchemaElement, defs []types.AttributeDefinition) string {
	parts := make([]string, 0, len(k))
	for _, e := range k {
		p := fmt.Sprintf("%s %s", aws.ToString(e.AttributeName), e.KeyType)
		if t := attrType(defs, aws.ToString(e.AttributeName)); t != "" {
			p += fmt.Sprintf(" (%s)", t)
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// enableTTL turns on time to live for TTLAttribute unless it is on. A server without the TTL API
// (dynalite) is reported, not an error.
func (s *Store) enableTTL(ctx context.Context, rep *MigrateReport) error {
	out, err := s.ttl.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if detail, ok := unsupported(err); ok {
		rep.TTL, rep.TTLDetail = TTLUnsupported, detail
		return nil
	}
	if err != nil {
		return fmt.Errorf("describe time to live: %w", err)
	}
	var status types.TimeToLiveStatus
	var attr string
	if d := out.TimeToLiveDescription; d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	switch status {
	case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
		if attr != TTLAttribute {
			return fmt.Errorf("time to live is on attribute %q; latestwins expires items by %q and a table has one TTL attribute: disable it, then run migrate again", attr, TTLAttribute)
		}
		rep.TTL = TTLEnabled
		if status == types.TimeToLiveStatusEnabling {
			rep.TTL = TTLEnabling
		}
		return nil
	case types.TimeToLiveStatusDisabling:
		return errors.New("time to live is being disabled; run migrate again once that has finished")
	}
	_, err = s.ttl.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(s.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	if detail, ok := unsupported(err); ok {
		rep.TTL, rep.TTLDetail = TTLUnsupported, detail
		return nil
	}
	if err != nil {
		return fmt.Errorf("enable time to live on %s: %w", TTLAttribute, err)
	}
	rep.TTL, rep.TTLChanged = TTLEnabling, true
	return nil
}

// unsupported recognises the answer of a server that does not implement an operation.
func unsupported(err error) (string, bool) {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException" {
		return api.ErrorCode(), true
	}
	return "", false
}

// writeSchema records SchemaVersion in the item meta#schema, conditional on the stored version
// being absent or lower, and reports the version stored afterwards.
func (s *Store) writeSchema(ctx context.Context, rep *MigrateReport) error {
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK:      &types.AttributeValueMemberS{Value: schemaKey},
			attrVersion: number(SchemaVersion),
		},
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #version < :version"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#version": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":version": number(SchemaVersion)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		rep.SchemaVersion, rep.SchemaWritten = SchemaVersion, true
		return nil
	case !errors.As(err, &ccf):
		return fmt.Errorf("write schema version: %w", err)
	}
	item, err := s.read(ctx, schemaKey)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	n, ok := item[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return fmt.Errorf("item %s has no numeric %q", schemaKey, attrVersion)
	}
	if rep.SchemaVersion, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
		return fmt.Errorf("item %s: %q: %w", schemaKey, attrVersion, err)
	}
	return nil
}
