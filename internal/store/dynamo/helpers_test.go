package dynamo

import (
	"context"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

// migrated returns a client and a fresh table that Migrate created.
func migrated(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	client := dynalitetest.Client(t)
	table := dynalitetest.TableName(t)
	rep, err := New(client, table).Migrate(context.Background())
	if err != nil {
		t.Fatalf("migrate %s: %v", table, err)
	}
	if !rep.Created {
		t.Fatalf("migrate %s: report %+v, want a created table", table, rep)
	}
	return client, table
}

// networkError is what the SDK returns when a connection dies: an operation error around a failed
// send, with no answer of the service in it.
func networkError(op string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
		Err: &smithyhttp.RequestSendError{Err: syscall.ECONNRESET}}
}

func writeID(in *dynamodb.PutItemInput) string {
	if s, ok := in.Item[attrWID].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
