package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Errors of the image endpoints, besides those of server.go (and
// ErrForbidden, enroll.go: a node asked for an image or blob its desired
// state does not reference, 403; ErrConflict, access.go: the image is in
// use, 409).
var (
	// ErrTooLarge: an upload is larger than the controller accepts (413).
	ErrTooLarge = errors.New("too large")
	// ErrInsufficientStorage: the image store's quota is reached (507).
	ErrInsufficientStorage = errors.New("insufficient storage")
	// ErrBusy: the node has as many downloads open as it may (429).
	ErrBusy = errors.New("too many downloads")
)

// Image is one image of the controller's image store.
type Image struct {
	// Name is normalized: docker.io/library/app:v1.
	Name string `json:"name"`
	// Digest is the manifest's.
	Digest string `json:"digest"`
	// Size is the bytes of manifest, config and layers.
	Size   int64     `json:"size"`
	Layers int       `json:"layers"`
	Pushed time.Time `json:"pushed"`
	// UsedBy lists the daemonsets ("namespace/name") whose revisions
	// reference the image.
	UsedBy []string `json:"usedBy,omitempty"`
}

// ImageList is the image store's content and usage.
type ImageList struct {
	Images []Image `json:"images"`
	// Used and Quota are the bytes the blobs take and may take.
	Used  int64 `json:"used"`
	Quota int64 `json:"quota"`
}

// ImageBackend is implemented by a Backend with an image store: the
// operator's side, authenticated with the API token.
type ImageBackend interface {
	// PushImages stores the images of a docker save or OCI image-layout
	// archive; name, when set, names the archive's only image.
	PushImages(ctx context.Context, archive io.Reader, name string) ([]Image, error)
	ListImages(ctx context.Context) (ImageList, error)
	// RemoveImage removes an image; one a revision references only with
	// force.
	RemoveImage(ctx context.Context, name string, force bool) (Image, error)
}

// NodeImageBackend serves the image store to nodes, authenticated with
// their own MQTT credential and limited to what their desired state
// references.
type NodeImageBackend interface {
	// AuthenticateNode reports whether token is node's credential and the
	// node is not revoked.
	AuthenticateNode(node string, token []byte) bool
	// NodeImageManifest returns the manifest of image and its digest, if
	// node's desired state references image. With digest set (or a
	// digest reference as image) it returns the manifest of that digest,
	// if a revision node's desired state runs pins it or names it.
	NodeImageManifest(ctx context.Context, node, image, digest string) (body []byte, manifestDigest string, err error)
	// OpenNodeBlob opens the blob of digest, if it belongs to an image
	// node's desired state references.
	OpenNodeBlob(ctx context.Context, node, digest string) (*os.File, error)
	// AcquireNodeDownload takes one of node's download slots; the caller
	// calls release when done. It fails with ErrBusy when all are taken.
	AcquireNodeDownload(node string) (release func(), err error)
}

// NodeImagesPrefix is the path under which nodes fetch images; requests
// there authenticate as a node (HTTP basic auth: node name, MQTT token),
// not with the API token.
const NodeImagesPrefix = "/api/" + Version + "/node/"

func (s *Server) imageRoutes(p string) {
	s.mux.HandleFunc("POST "+p+"/images", s.pushImages)
	s.handle("GET "+p+"/images", s.listImages)
	s.handle("DELETE "+p+"/images", s.removeImage)
	s.nodeMux = http.NewServeMux()
	s.nodeMux.HandleFunc("GET "+NodeImagesPrefix+"manifests", s.nodeManifest)
	s.nodeMux.HandleFunc("GET "+NodeImagesPrefix+"blobs/{digest}", s.nodeBlob)
	s.nodeMux.HandleFunc("HEAD "+NodeImagesPrefix+"blobs/{digest}", s.nodeBlob)
}

func (s *Server) imageBackend() (ImageBackend, error) {
	b, ok := s.backend.(ImageBackend)
	if !ok {
		return nil, fmt.Errorf("%w: this controller has no image store", ErrUnavailable)
	}
	return b, nil
}

// pushImages serves POST /images: the body is the archive, streamed to
// the store. The read deadline moves on with every chunk received, so a
// large image over a slow link is bounded by its progress, not its size.
func (s *Server) pushImages(w http.ResponseWriter, r *http.Request) {
	v, err := func() (any, error) {
		b, err := s.imageBackend()
		if err != nil {
			return nil, err
		}
		body := &progressReader{r: r.Body, rc: http.NewResponseController(w), timeout: s.limits.ReadTimeout}
		return b.PushImages(r.Context(), body, r.URL.Query().Get("name"))
	}()
	s.startWriteTimeout(w)
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of a refused body is not read
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// progressReader extends the connection's read deadline by timeout before
// every read.
type progressReader struct {
	r       io.Reader
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	if p.timeout > 0 {
		_ = p.rc.SetReadDeadline(time.Now().Add(p.timeout))
	}
	return p.r.Read(b)
}

func (s *Server) listImages(_ http.ResponseWriter, r *http.Request) (any, error) {
	b, err := s.imageBackend()
	if err != nil {
		return nil, err
	}
	return b.ListImages(r.Context())
}

// removeImage serves DELETE /images?name=NAME[&force=true].
func (s *Server) removeImage(_ http.ResponseWriter, r *http.Request) (any, error) {
	b, err := s.imageBackend()
	if err != nil {
		return nil, err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		return nil, fmt.Errorf("%w: name: required", ErrInvalid)
	}
	force, err := boolQuery(r, "force")
	if err != nil {
		return nil, err
	}
	return b.RemoveImage(r.Context(), name, force)
}

// IsNodePath reports whether path is a node's own request (under
// NodeImagesPrefix: image fetches, key registration), which authenticates
// with the node's credential, not a user's token.
func IsNodePath(path string) bool { return strings.HasPrefix(path, NodeImagesPrefix) }

// serveNode answers the requests of nodes for images (NodeImagesPrefix)
// and reports whether r was one. They authenticate with the node's own
// credential, throttled like bearer-token failures.
func (s *Server) serveNode(w http.ResponseWriter, r *http.Request) bool {
	if s.nodeMux == nil || !IsNodePath(r.URL.Path) {
		return false
	}
	b, ok := s.backend.(NodeImageBackend)
	if !ok {
		refuse(w, http.StatusServiceUnavailable, "this controller has no image store")
		return true
	}
	source := s.throttleSource(r)
	if d := s.guard.blocked(source); d > 0 {
		s.obs.AuthThrottled()
		w.Header().Set("Retry-After", strconv.FormatInt(int64(d.Seconds())+1, 10))
		refuse(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed authentications from %s", source))
		return true
	}
	node, token, ok := r.BasicAuth()
	if !ok || node == "" || !b.AuthenticateNode(node, []byte(token)) {
		s.obs.AuthFailed()
		s.guard.failed(source, "wrong node credential", r.Method, r.URL.Path)
		w.Header().Set("WWW-Authenticate", `Basic realm="edgeset node"`)
		refuse(w, http.StatusUnauthorized, "missing or wrong node credential")
		return true
	}
	MarkAuthenticated(r)
	s.nodeMux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nodeKey{}, node)))
	return true
}

// nodeKey is the context key of the node serveNode authenticated.
type nodeKey struct{}

// nodeOf returns the node serveNode authenticated r as.
func nodeOf(r *http.Request) string {
	node, _ := r.Context().Value(nodeKey{}).(string)
	return node
}

// nodeManifest serves GET node/manifests?image=IMAGE[&digest=sha256:HEX].
func (s *Server) nodeManifest(w http.ResponseWriter, r *http.Request) {
	b := s.backend.(NodeImageBackend)
	image := r.URL.Query().Get("image")
	if image == "" {
		s.writeError(w, r, fmt.Errorf("%w: image: required", ErrInvalid))
		return
	}
	body, digest, err := b.NodeImageManifest(r.Context(), nodeOf(r), image, r.URL.Query().Get("digest"))
	s.startWriteTimeout(w)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// nodeBlob serves GET node/blobs/{digest}, with Range requests (a
// dropped download resumes) and the digest as ETag (for If-Range). The
// write deadline moves on with every chunk written.
func (s *Server) nodeBlob(w http.ResponseWriter, r *http.Request) {
	b := s.backend.(NodeImageBackend)
	node, digest := nodeOf(r), r.PathValue("digest")
	release, err := b.AcquireNodeDownload(node)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, err)
		return
	}
	defer release()
	f, err := b.OpenNodeBlob(r.Context(), node, digest)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+digest+`"`)
	w.Header().Set("Docker-Content-Digest", digest)
	http.ServeContent(s.ProgressWriter(w), r, "", time.Time{}, f)
}

// ProgressWriter returns w moving its connection's write deadline to
// Limits.WriteTimeout from now before every write, for a response written
// as it comes (a download, a stream a standby forwards): the timeout then
// bounds a stall, not the whole response. It unwraps to w
// (http.ResponseController), so flushes and hijacks reach w.
func (f *Front) ProgressWriter(w http.ResponseWriter) http.ResponseWriter {
	return &progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: f.limits.WriteTimeout}
}

// progressWriter extends the connection's write deadline by timeout
// before every write.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressWriter) extend() {
	if p.timeout > 0 {
		_ = p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	}
}

func (p *progressWriter) WriteHeader(code int) {
	p.extend()
	p.ResponseWriter.WriteHeader(code)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.extend()
	return p.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// imageErrorCode maps the errors of this file to their status codes.
func imageErrorCode(err error) (int, bool) {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, true
	case errors.Is(err, ErrInsufficientStorage):
		return http.StatusInsufficientStorage, true
	case errors.Is(err, ErrBusy):
		return http.StatusTooManyRequests, true
	}
	return 0, false
}

// PushImage uploads a docker save or OCI image-layout archive to the
// controller's image store; name, when set, names its only image. The
// upload is not bounded by the client's timeout, only by ctx.
func (c *Client) PushImage(ctx context.Context, archive io.Reader, name string) ([]Image, error) {
	path := "/images"
	if name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/"+Version+path, archive)
	if err != nil {
		return nil, fmt.Errorf("build request POST %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/x-tar")
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, http.MethodPost, path, err)
	}
	defer resp.Body.Close()
	var out []Image
	return out, decodeResponse(resp, &out)
}

// ListImages lists the controller's image store.
func (c *Client) ListImages(ctx context.Context) (ImageList, error) {
	var out ImageList
	return out, c.do(ctx, http.MethodGet, "/images", nil, &out)
}

// RemoveImage removes an image from the controller's image store.
func (c *Client) RemoveImage(ctx context.Context, name string, force bool) (Image, error) {
	var out Image
	q := "?name=" + url.QueryEscape(name)
	if force {
		q += "&force=true"
	}
	return out, c.do(ctx, http.MethodDelete, "/images"+q, nil, &out)
}
