package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
)

// DynamoDB's limits on one batch request.
const (
	maxBatchWrite = 25
	maxBatchGet   = 100
	// maxBatchRounds bounds the retries of a batch's unprocessed part (throttling).
	maxBatchRounds = 8
)

// PutRecords implements authority.Store with BatchWriteItem, 25 items a request. A record is
// immutable and written whole, so a repeated or partly repeated call stores the same items: the
// writes need no condition. Items the service leaves unprocessed are sent again with a back-off.
func (s *Store) PutRecords(ctx context.Context, recs []authority.Record) error {
	for chunk := range slices.Chunk(recs, maxBatchWrite) {
		reqs := make([]types.WriteRequest, 0, len(chunk))
		for i := range chunk {
			item, err := encodeRecord(&chunk[i])
			if err != nil {
				return err
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		pending := map[string][]types.WriteRequest{s.table: reqs}
		for round := 0; len(pending[s.table]) > 0; round++ {
			if round >= maxBatchRounds {
				return fmt.Errorf("store %d records in table %s: %d still unprocessed after %d rounds", len(chunk), s.table, len(pending[s.table]), round)
			}
			if round > 0 {
				if err := pause(ctx, round); err != nil {
					return fmt.Errorf("store records in table %s: %w", s.table, err)
				}
			}
			out, err := s.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("store records in table %s: %w", s.table, err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}

// GetRecords implements authority.Store with BatchGetItem and ConsistentRead, 100 keys a request.
func (s *Store) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	var out []authority.Record
	for chunk := range slices.Chunk(slices.Compact(slices.Sorted(slices.Values(keys))), maxBatchGet) {
		ks := make([]map[string]types.AttributeValue, len(chunk))
		for i, k := range chunk {
			ks[i] = map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: k}}
		}
		pending := map[string]types.KeysAndAttributes{s.table: {Keys: ks, ConsistentRead: aws.Bool(true)}}
		for round := 0; len(pending[s.table].Keys) > 0; round++ {
			if round >= maxBatchRounds {
				return nil, fmt.Errorf("read %d records in table %s: %d keys still unprocessed after %d rounds", len(chunk), s.table, len(pending[s.table].Keys), round)
			}
			if round > 0 {
				if err := pause(ctx, round); err != nil {
					return nil, fmt.Errorf("read records in table %s: %w", s.table, err)
				}
			}
			res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("read records in table %s: %w", s.table, err)
			}
			for _, item := range res.Responses[s.table] {
				r, ok, err := decodeRecord(item)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, r)
				}
			}
			pending = res.UnprocessedKeys
			if ka, ok := pending[s.table]; ok {
				// A retry must read as strongly as the first request: the duplicate check relies on it.
				ka.ConsistentRead = aws.Bool(true)
				pending[s.table] = ka
			}
		}
	}
	return out, nil
}
