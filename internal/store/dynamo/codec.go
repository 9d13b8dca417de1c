package dynamo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
)

// The document bodies are native DynamoDB maps named after the domain's json tags, so that the
// table reads well in the console and stays independent of a second set of tags.
func jsonTags(o *attributevalue.EncoderOptions)   { o.TagKey = "json" }
func jsonTagsIn(o *attributevalue.DecoderOptions) { o.TagKey = "json" }

// encodeItem lays out doc as it is stored at revision h.rev, written by h.wids[0].
func encodeItem(doc *authority.Doc, h history) (map[string]types.AttributeValue, error) {
	wids := make([]types.AttributeValue, len(h.wids))
	for i, w := range h.wids {
		wids[i] = &types.AttributeValueMemberS{Value: w}
	}
	item := map[string]types.AttributeValue{
		attrPK:   &types.AttributeValueMemberS{Value: doc.Key},
		attrRev:  number(h.rev),
		attrWID:  &types.AttributeValueMemberS{Value: h.wids[0]},
		attrWIDs: &types.AttributeValueMemberL{Value: wids},
	}
	if doc.Env != nil {
		av, err := attributevalue.MarshalWithOptions(doc.Env, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode environment of %s: %w", doc.Key, err)
		}
		item[attrEnv] = av
	}
	if doc.Lease != nil {
		av, err := attributevalue.MarshalWithOptions(doc.Lease, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode lease of %s: %w", doc.Key, err)
		}
		item[attrLease] = av
	}
	if doc.Pending && strings.HasPrefix(doc.Key, envPrefix) {
		item[attrPending] = &types.AttributeValueMemberS{Value: pendingValue}
	}
	return item, nil
}

// decodeItem turns a stored item back into a document, with the write ids it carries.
func decodeItem(item map[string]types.AttributeValue) (*authority.Doc, history, error) {
	h, err := decodeHistory(item)
	if err != nil {
		return nil, history{}, err
	}
	pk, ok := item[attrPK].(*types.AttributeValueMemberS)
	if !ok {
		return nil, history{}, fmt.Errorf("item without a string %q", attrPK)
	}
	doc := &authority.Doc{Key: pk.Value, Rev: h.rev}
	_, doc.Pending = item[attrPending]
	if av, ok := item[attrEnv]; ok {
		doc.Env = &authority.Env{}
		if err := attributevalue.UnmarshalWithOptions(av, doc.Env, jsonTagsIn); err != nil {
			return nil, history{}, fmt.Errorf("decode environment of %s: %w", pk.Value, err)
		}
	}
	if av, ok := item[attrLease]; ok {
		doc.Lease = &authority.NamedLease{}
		if err := attributevalue.UnmarshalWithOptions(av, doc.Lease, jsonTagsIn); err != nil {
			return nil, history{}, fmt.Errorf("decode lease of %s: %w", pk.Value, err)
		}
	}
	return doc, h, nil
}

// decodeHistory reads the revision and the write ids of an item.
func decodeHistory(item map[string]types.AttributeValue) (history, error) {
	var h history
	if av, ok := item[attrRev]; ok {
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			return history{}, fmt.Errorf("attribute %q is not a number", attrRev)
		}
		rev, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return history{}, fmt.Errorf("attribute %q: %w", attrRev, err)
		}
		h.rev = rev
	}
	if av, ok := item[attrWIDs].(*types.AttributeValueMemberL); ok {
		for _, w := range av.Value {
			if s, ok := w.(*types.AttributeValueMemberS); ok {
				h.wids = append(h.wids, s.Value)
			}
		}
	} else if w, ok := item[attrWID].(*types.AttributeValueMemberS); ok {
		h.wids = []string{w.Value}
	}
	return h, nil
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
