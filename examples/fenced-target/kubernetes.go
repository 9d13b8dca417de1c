package fencedtarget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// The annotations a deploy writes on the object it changes.
const (
	AnnotationToken   = "latestwins.dev/fencing-token"
	AnnotationRelease = "latestwins.dev/release"
)

// Kubernetes fences a Deployment: the release and the token are annotations, and an update is sent
// with the resourceVersion that was read, so the apiserver refuses it (409 Conflict) if the object
// changed in between; the deploy then reads again and finds the newer token, or tries again.
// (kubectl does the same with `kubectl replace` of an object that carries its resourceVersion.)
type Kubernetes struct {
	Client    *http.Client
	APIServer string // https://HOST:PORT
	Token     string // a bearer token allowed to get and update the Deployment
	Namespace string
	Name      string
	// Attempts bounds the re-reads after a conflict (default 5).
	Attempts int
}

func (k *Kubernetes) url() string {
	return k.APIServer + "/apis/apps/v1/namespaces/" + url.PathEscape(k.Namespace) + "/deployments/" + url.PathEscape(k.Name)
}

// Rollout sets the Deployment's image to image and records release and token, unless the
// Deployment carries a newer token (a *StaleError).
func (k *Kubernetes) Rollout(ctx context.Context, release, image string, token int64) error {
	attempts := k.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	for range attempts {
		obj, err := k.do(ctx, http.MethodGet, nil)
		if err != nil {
			return err
		}
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		if held, err := strconv.ParseInt(fmt.Sprint(ann[AnnotationToken]), 10, 64); err == nil && held > token {
			return &StaleError{Held: held, Mine: token}
		}
		ann[AnnotationToken] = strconv.FormatInt(token, 10)
		ann[AnnotationRelease] = release
		meta["annotations"] = ann
		if err := setImage(obj, image); err != nil {
			return err
		}
		// obj still carries the resourceVersion it was read with: the update is conditional on it.
		if _, err := k.do(ctx, http.MethodPut, obj); err != nil {
			if errors.Is(err, errConflict) {
				continue
			}
			return err
		}
		return nil
	}
	return fmt.Errorf("update %s/%s: it kept changing over %d attempts", k.Namespace, k.Name, attempts)
}

var errConflict = errors.New("conflict")

func (k *Kubernetes) do(ctx context.Context, method string, obj map[string]any) (map[string]any, error) {
	var body io.Reader
	if obj != nil {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encode %s/%s: %w", k.Namespace, k.Name, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.url(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", method, k.Namespace, k.Name, err)
	}
	req.Header.Set("Accept", "application/json")
	if obj != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k.Token != "" {
		req.Header.Set("Authorization", "Bearer "+k.Token)
	}
	resp, err := k.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", method, k.Namespace, k.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict {
		return nil, errConflict
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s %s/%s: %s: %s", method, k.Namespace, k.Name, resp.Status, b)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s %s/%s: decode: %w", method, k.Namespace, k.Name, err)
	}
	return out, nil
}

// setImage sets the image of the Deployment's first container.
func setImage(obj map[string]any, image string) error {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	containers, _ := pod["containers"].([]any)
	if len(containers) == 0 {
		return fmt.Errorf("the Deployment has no container to set the image of")
	}
	c, ok := containers[0].(map[string]any)
	if !ok {
		return fmt.Errorf("the Deployment's first container is not an object")
	}
	c["image"] = image
	return nil
}
