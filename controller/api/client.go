package api

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
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Client talks to a controller's API.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for the controller at server (for example
// http://127.0.0.1:8080) authenticating with token. hc may be nil.
func NewClient(server, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(server, "/"), token: token, http: hc}
}

// StatusError is a non-2xx answer from the controller.
type StatusError struct {
	Code int
	Body Error
	// Foreign is set when the body was not an edgeset error document:
	// the server is not an edgeset controller (or not this version's).
	Foreign bool
}

func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString(e.Body.Message)
	for _, f := range e.Body.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// Is lets errors.Is(err, ErrNotFound) work across the wire.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotController:
		return e.Foreign
	case ErrNotFound:
		return e.Code == http.StatusNotFound
	case ErrInvalid:
		return e.Code == http.StatusBadRequest || e.Code == http.StatusUnprocessableEntity
	case ErrUnavailable:
		return e.Code == http.StatusServiceUnavailable
	case ErrTimeout:
		return e.Code == http.StatusGatewayTimeout
	}
	return false
}

// ErrUnauthorized is returned when the controller refuses the token.
var ErrUnauthorized = errors.New("the controller refused the API token")

// Apply sends manifests (YAML or JSON, one or more documents) read from
// source.
func (c *Client) Apply(ctx context.Context, source string, data []byte, dryRun bool) ([]ApplyResult, error) {
	return c.ApplyWith(ctx, source, data, ApplyOptions{DryRun: dryRun})
}

// ApplyWith is Apply with options: opts.Source is recorded on every
// daemonset applied.
func (c *Client) ApplyWith(ctx context.Context, source string, data []byte, opts ApplyOptions) ([]ApplyResult, error) {
	q := url.Values{"source": {source}}
	if opts.DryRun {
		q.Set("dryRun", "true")
	}
	if opts.Source != "" {
		q.Set("owner", opts.Source)
	}
	var out []ApplyResult
	err := c.do(ctx, http.MethodPost, "/apply?"+q.Encode(), data, &out)
	return out, err
}

// ListDaemonSets returns every daemonset with its status.
func (c *Client) ListDaemonSets(ctx context.Context) ([]DaemonSet, error) {
	var out []DaemonSet
	return out, c.do(ctx, http.MethodGet, "/daemonsets", nil, &out)
}

// GetDaemonSet returns one daemonset with its instances; key is
// "namespace/name".
func (c *Client) GetDaemonSet(ctx context.Context, key string) (DaemonSet, error) {
	var out DaemonSet
	return out, c.do(ctx, http.MethodGet, "/daemonsets/"+escapeKey(key), nil, &out)
}

// DeleteDaemonSet deletes a daemonset; orphan leaves its instances running.
func (c *Client) DeleteDaemonSet(ctx context.Context, key string, orphan bool) error {
	return c.do(ctx, http.MethodDelete, "/daemonsets/"+escapeKey(key)+"?orphan="+strconv.FormatBool(orphan), nil, nil)
}

// Rollout acts on a daemonset's rollout and returns the daemonset.
func (c *Client) Rollout(ctx context.Context, key string, req RolloutRequest) (DaemonSet, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return DaemonSet{}, err
	}
	var out DaemonSet
	return out, c.doJSON(ctx, http.MethodPost, "/daemonsets/"+escapeKey(key)+"/rollout", body, &out)
}

// ForceRollout resumes a daemonset's rollout and overrides the stale
// update locks of its nodes, or of node alone when it is not empty.
func (c *Client) ForceRollout(ctx context.Context, key, node string) (DaemonSet, error) {
	path := "/daemonsets/" + escapeKey(key) + "/rollout/force"
	if node != "" {
		path += "?node=" + url.QueryEscape(node)
	}
	var out DaemonSet
	return out, c.doJSON(ctx, http.MethodPost, path, nil, &out)
}

// RolloutHistory lists a daemonset's revisions, oldest first.
func (c *Client) RolloutHistory(ctx context.Context, key string) ([]Revision, error) {
	var out []Revision
	return out, c.do(ctx, http.MethodGet, "/daemonsets/"+escapeKey(key)+"/revisions", nil, &out)
}

// DeleteInstance removes a daemonset's instance from one node.
func (c *Client) DeleteInstance(ctx context.Context, key, node string) error {
	return c.do(ctx, http.MethodDelete, "/daemonsets/"+escapeKey(key)+"/instances/"+url.PathEscape(node), nil, nil)
}

// ListNodes returns every known node.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	return out, c.do(ctx, http.MethodGet, "/nodes", nil, &out)
}

// GetNode returns one node with its instances and placement reasons.
func (c *Client) GetNode(ctx context.Context, name string) (Node, error) {
	var out Node
	return out, c.do(ctx, http.MethodGet, "/nodes/"+url.PathEscape(name), nil, &out)
}

// UpdateNode changes a node's overrides and returns the node.
func (c *Client) UpdateNode(ctx context.Context, name string, patch NodePatch) (Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return Node{}, err
	}
	var out Node
	return out, c.doJSON(ctx, http.MethodPatch, "/nodes/"+url.PathEscape(name), body, &out)
}

// DeleteNode forgets a node and clears its desired state.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/nodes/"+url.PathEscape(name), nil, nil)
}

// ListInstances returns every instance in the fleet.
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	var out []Instance
	return out, c.do(ctx, http.MethodGet, "/instances", nil, &out)
}

// Events returns stored events, oldest first.
func (c *Client) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	q := url.Values{}
	if f.Object != "" {
		q.Set("object", f.Object)
	}
	if f.SinceSeq > 0 {
		q.Set("since", strconv.FormatUint(f.SinceSeq, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out []Event
	return out, c.do(ctx, http.MethodGet, "/events?"+q.Encode(), nil, &out)
}

// Sources lists the files of the controller's watched manifests directory.
func (c *Client) Sources(ctx context.Context) ([]Source, error) {
	var out []Source
	return out, c.do(ctx, http.MethodGet, "/sources", nil, &out)
}

// Version returns the controller's version.
func (c *Client) Version(ctx context.Context) (VersionInfo, error) {
	var out VersionInfo
	return out, c.do(ctx, http.MethodGet, "/version", nil, &out)
}

func escapeKey(key string) string {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		ns, name = schema.DefaultNamespace, key
	}
	return url.PathEscape(ns) + "/" + url.PathEscape(name)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	return c.send(ctx, method, path, "application/yaml", body, out)
}

func (c *Client) doJSON(ctx context.Context, method, path string, body []byte, out any) error {
	return c.send(ctx, method, path, "application/json", body, out)
}

// doJSONValue sends v encoded as JSON.
func (c *Client) doJSONValue(ctx context.Context, method, path string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode request %s %s: %w", method, path, err)
	}
	return c.doJSON(ctx, method, path, body, out)
}

func (c *Client) send(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/"+Version+path, rd)
	if err != nil {
		return fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, method, path, err)
	}
	defer resp.Body.Close()
	return decodeResponse(resp, out)
}

func decodeResponse(resp *http.Response, out any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Code: resp.StatusCode}
		if json.Unmarshal(data, &se.Body) != nil || se.Body.Message == "" {
			se.Body.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, clip(bytes.TrimSpace(data)))
			se.Foreign = true
		}
		return se
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: decode response (%s): %v", ErrNotController, resp.Header.Get("Content-Type"), err)
	}
	return nil
}

// ErrNotController: the server answered, but not as an edgeset
// controller's API does (a body that is not edgeset's JSON).
var ErrNotController = errors.New("the server does not answer as an edgeset controller")

// transportError says why a request got no answer: the caller's context
// ended (its cause, so a command's own timeout names itself), the
// client's timeout passed, or the controller could not be reached.
func (c *Client) transportError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx))
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() && c.http.Timeout > 0 {
		return fmt.Errorf("controller at %s did not answer %s %s within %s: %w", c.base, method, path, c.http.Timeout, err)
	}
	switch {
	case strings.Contains(err.Error(), "malformed HTTP response"):
		return fmt.Errorf("%w: %s does not speak HTTP: %w", ErrNotController, c.base, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Connected, then closed without an answer: not "unreachable".
		return fmt.Errorf("%s closed the connection without an HTTP answer (a port that is not HTTP, such as the MQTT one, does this; so does a controller at its API connection limits): %w", c.base, err)
	}
	return fmt.Errorf("controller at %s is unreachable: %w", c.base, err)
}

// clip shortens a foreign body for an error message.
func clip(b []byte) []byte {
	const max = 200
	if len(b) > max {
		return append(b[:max:max], "..."...)
	}
	return b
}
