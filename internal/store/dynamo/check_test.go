package dynamo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// Check finds what Migrate would change and changes none of it: a migrated table passes, a missing
// one or one lacking the index and schema version needs migrating (and still does after Check), a
// table of a newer schema is refused.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, table := migrated(t)
	rep, err := New(client, table).Check(ctx)
	if err != nil || rep.SchemaVersion != SchemaVersion || rep.Table != table {
		t.Fatalf("Check of a migrated table: %+v, %v", rep, err)
	}

	missing := dynalitetest.TableName(t)
	if _, err := New(client, missing).Check(ctx); !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "there is no such table") {
		t.Errorf("Check of a missing table: %v, want ErrNotMigrated saying there is none", err)
	}
	if out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(missing)}); err == nil {
		t.Errorf("Check created table %s: %+v", missing, out.Table)
	}

	bare := dynalitetest.TableName(t)
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(bare), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(client, bare).waitActive(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := New(client, bare).Check(ctx)
		var nm *NotMigratedError
		if !errors.As(err, &nm) || strings.Join(nm.Needs, "; ") != "no index pending: migrate adds it; no schema version recorded: migrate records 2" {
			t.Errorf("Check of a table made by hand: %v", err)
		}
	}

	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: schemaKey}, attrVersion: number(SchemaVersion + 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(client, table).Check(ctx); err == nil || errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "upgrade latestwins") {
		t.Errorf("Check of a table of a newer schema: %v, want an error saying to upgrade", err)
	}
}
