package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestHandEditedItemIsRefused: an environment whose item was edited (in the console, say) to
// observed 50, desired 1 is refused when read, and a claim after it hands out no generation.
func TestHandEditedItemIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	s := New(client, table)
	key := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: authority.EnvKey("staging")}}
	storetest.SeedForHandEdit(t, s, "staging")
	raw := func() []byte {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		hot, ok := out.Item[attrHot].(*types.AttributeValueMemberS)
		if !ok {
			t.Fatalf("item %v has no string %q", out.Item, attrHot)
		}
		return []byte(hot.Value)
	}
	edited := storetest.HandEdit(t, raw())
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("SET #hot = :hot"),
		ExpressionAttributeNames:  map[string]string{"#hot": attrHot},
		ExpressionAttributeValues: map[string]types.AttributeValue{":hot": &types.AttributeValueMemberS{Value: string(edited)}},
	}); err != nil {
		t.Fatal(err)
	}
	storetest.CheckHandEditRefused(t, s, "staging", raw)
}
