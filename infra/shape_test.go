package infra

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// tableShape is what the stacks and Migrate must agree on about the table.
type tableShape struct {
	Billing    string
	Attributes []string          // "name TYPE", sorted
	Key        string            // "name HASH, name RANGE"
	Indexes    map[string]string // name -> "key schema; projection"
}

// migratedShape creates the table with the code (Store.Migrate, on dynalite) and describes it.
func migratedShape(t *testing.T) tableShape {
	t.Helper()
	client := dynalitetest.Client(t)
	name := dynalitetest.TableName(t)
	ctx := context.Background()
	if _, err := dynamo.New(client, name).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	shape := tableShape{Indexes: map[string]string{}}
	if d.BillingModeSummary != nil {
		shape.Billing = string(d.BillingModeSummary.BillingMode)
	}
	for _, a := range d.AttributeDefinitions {
		shape.Attributes = append(shape.Attributes, aws.ToString(a.AttributeName)+" "+string(a.AttributeType))
	}
	var parts []string
	for _, k := range d.KeySchema {
		parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	shape.Key = strings.Join(parts, ", ")
	for _, idx := range d.GlobalSecondaryIndexes {
		var ks []string
		for _, k := range idx.KeySchema {
			ks = append(ks, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		shape.Indexes[aws.ToString(idx.IndexName)] = strings.Join(ks, ", ") + "; " + string(idx.Projection.ProjectionType)
	}
	sort.Strings(shape.Attributes)
	return shape
}
