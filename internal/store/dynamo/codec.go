package dynamo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
)

// The document bodies are native DynamoDB maps named after the domain's json tags, so that the
// table reads well in the console and stays independent of a second set of tags.
func jsonTags(o *attributevalue.EncoderOptions)   { o.TagKey = "json" }
func jsonTagsIn(o *attributevalue.DecoderOptions) { o.TagKey = "json" }

// movedMarker is what the first layout's attribute holds on items of schema 2.
const movedMarker = "stored in the attribute hot by a newer latestwins (schema 2): upgrade latestwins"

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
		b, err := authority.EncodeEnv(doc.Env)
		if err != nil {
			return nil, fmt.Errorf("encode environment of %s: %w", doc.Key, err)
		}
		item[attrHot] = &types.AttributeValueMemberS{Value: string(b)}
		// The first layout's attribute, as a string: a latestwins of that layout fails to decode it
		// and stops, instead of reading no state and writing a fresh environment over this one.
		item[attrEnv] = &types.AttributeValueMemberS{Value: movedMarker}
	}
	if doc.Lease != nil {
		av, err := attributevalue.MarshalWithOptions(doc.Lease, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode lease of %s: %w", doc.Key, err)
		}
		item[attrLease] = av
	}
	if doc.Deliveries != nil {
		av, err := attributevalue.MarshalWithOptions(doc.Deliveries, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode delivery cursor of %s: %w", doc.Key, err)
		}
		item[attrDeliveries] = av
	}
	if len(doc.Kept) > 0 {
		item[attrKept] = &types.AttributeValueMemberS{Value: string(doc.Kept)}
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
	switch av := item[attrHot].(type) {
	case *types.AttributeValueMemberS:
		e, err := authority.DecodeEnv([]byte(av.Value))
		if err != nil {
			if ce, ok := errors.AsType[*authority.CorruptError](err); ok {
				ce.Key = pk.Value // the key it is stored under, whatever name it holds
			}
			return nil, history{}, fmt.Errorf("decode environment of %s: %w", pk.Value, err)
		}
		doc.Env = e
	case nil:
		if av, ok := item[attrEnv]; ok { // the first layout: a map named after the json tags
			e, err := decodeFirstLayout(av)
			if err != nil {
				return nil, history{}, fmt.Errorf("decode environment of %s: %w", pk.Value, err)
			}
			doc.Env = e
		}
	default:
		return nil, history{}, fmt.Errorf("attribute %q of %s is not a string", attrHot, pk.Value)
	}
	if av, ok := item[attrLease]; ok {
		doc.Lease = &authority.NamedLease{}
		if err := attributevalue.UnmarshalWithOptions(av, doc.Lease, jsonTagsIn); err != nil {
			return nil, history{}, fmt.Errorf("decode lease of %s: %w", pk.Value, err)
		}
	}
	if av, ok := item[attrDeliveries]; ok {
		doc.Deliveries = &authority.DeliveryCursor{}
		if err := attributevalue.UnmarshalWithOptions(av, doc.Deliveries, jsonTagsIn); err != nil {
			return nil, history{}, fmt.Errorf("decode delivery cursor of %s: %w", pk.Value, err)
		}
	}
	if av, ok := item[attrKept].(*types.AttributeValueMemberS); ok {
		doc.Kept = json.RawMessage(av.Value)
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

// decodeFirstLayout reads an environment the first layout stored as a map attribute, through the
// JSON it mirrors.
func decodeFirstLayout(av types.AttributeValue) (*authority.Env, error) {
	var m map[string]any
	if err := attributevalue.UnmarshalWithOptions(av, &m, jsonTagsIn); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return authority.DecodeEnv(b)
}

// encodeRecord lays out a record as its own item: the event or intent as a map named after the
// domain's json tags (readable in the console), and its expiry for the table's time to live.
func encodeRecord(r *authority.Record) (map[string]types.AttributeValue, error) {
	item := map[string]types.AttributeValue{
		attrPK:       &types.AttributeValueMemberS{Value: r.Key},
		TTLAttribute: number(r.ExpiresAt.Unix()),
		attrExpires:  &types.AttributeValueMemberS{Value: r.ExpiresAt.UTC().Format(time.RFC3339Nano)},
	}
	switch {
	case r.Event != nil:
		av, err := attributevalue.MarshalWithOptions(r.Event, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode record %s: %w", r.Key, err)
		}
		item[attrEvent] = av
	case r.Intent != nil:
		av, err := attributevalue.MarshalWithOptions(r.Intent, jsonTags)
		if err != nil {
			return nil, fmt.Errorf("encode record %s: %w", r.Key, err)
		}
		item[attrIntent] = av
	case len(r.Kept) > 0:
		item[attrKept] = &types.AttributeValueMemberS{Value: string(r.Kept)}
	default:
		return nil, fmt.Errorf("encode record %s: neither an event, an intent nor a kept value", r.Key)
	}
	return item, nil
}

// decodeRecord reads a record item; ok is false for an item that is not a record.
func decodeRecord(item map[string]types.AttributeValue) (authority.Record, bool, error) {
	pk, _ := item[attrPK].(*types.AttributeValueMemberS)
	exp, _ := item[attrExpires].(*types.AttributeValueMemberS)
	if pk == nil || exp == nil {
		return authority.Record{}, false, nil
	}
	r := authority.Record{Key: pk.Value}
	t, err := time.Parse(time.RFC3339Nano, exp.Value)
	if err != nil {
		return r, false, fmt.Errorf("record %s: attribute %q: %w", pk.Value, attrExpires, err)
	}
	r.ExpiresAt = t
	if av, ok := item[attrEvent]; ok {
		r.Event = &authority.Event{}
		if err := attributevalue.UnmarshalWithOptions(av, r.Event, jsonTagsIn); err != nil {
			return r, false, fmt.Errorf("decode record %s: %w", pk.Value, err)
		}
	}
	if av, ok := item[attrIntent]; ok {
		r.Intent = &authority.IntentRecord{}
		if err := attributevalue.UnmarshalWithOptions(av, r.Intent, jsonTagsIn); err != nil {
			return r, false, fmt.Errorf("decode record %s: %w", pk.Value, err)
		}
	}
	if av, ok := item[attrKept].(*types.AttributeValueMemberS); ok {
		r.Kept = json.RawMessage(av.Value)
	}
	return r, r.Event != nil || r.Intent != nil || len(r.Kept) > 0, nil
}
