package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
)

var _ authority.RecordLister = (*Store)(nil)

// ListRecords returns the records whose keys begin with prefix, with a strongly consistent Scan:
// for moving an environment to another store (latestwins migrate --from --to) only, never on a
// request path.
func (s *Store) ListRecords(ctx context.Context, prefix string) ([]authority.Record, error) {
	scanner, ok := s.api.(Scanner)
	if w, unwraps := s.api.(interface{ Unwrap() API }); !ok && unwraps {
		scanner, ok = w.Unwrap().(Scanner)
	}
	if !ok {
		return nil, fmt.Errorf("list the records of table %s: the client given to the store cannot scan (pass a *dynamodb.Client)", s.table)
	}
	p := dynamodb.NewScanPaginator(scanner, &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(#pk, :p)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}},
	})
	var out []authority.Record
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan table %s: %w", s.table, err)
		}
		for _, item := range page.Items {
			r, ok, err := decodeRecord(item)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
