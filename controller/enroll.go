package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/enrollment"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
	"github.com/edgeset/edgeset/signing"
)

// ReasonEnrolled is the event recorded on a node a code admitted.
const ReasonEnrolled = "Enrolled"

var _ api.Enroller = (*Controller)(nil)

// CreateEnrollment makes an enrollment code as req asks and stores its
// record; the code is in the answer only. Codes past their use are
// pruned to make room (enrollment.Prunable); past enrollment.MaxCodes
// live ones the request is refused.
func (c *Controller) CreateEnrollment(_ context.Context, req api.EnrollmentRequest, requester string) (api.EnrollmentCode, error) {
	spec := enrollment.Spec{Node: req.Node, NamePrefix: req.NamePrefix, Uses: req.Uses, Labels: req.Labels, Description: req.Description}
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			return api.EnrollmentCode{}, fmt.Errorf("%w: ttl: %q is not a duration such as 24h", api.ErrInvalid, req.TTL)
		}
		spec.TTL = d
	}
	now := c.now()
	code, rec, err := enrollment.New(spec, requester, now, rand.Reader)
	if err != nil {
		return api.EnrollmentCode{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	if err := c.makeRoomForEnrollment(now); err != nil {
		return api.EnrollmentCode{}, err
	}
	if err := c.store.PutEnrollment(rec); err != nil {
		return api.EnrollmentCode{}, err
	}
	what := fmt.Sprintf("%d devices", rec.Uses)
	if rec.Node != "" {
		what = "node " + rec.Node
	}
	c.log.Info("enrollment code created", "id", rec.ID, "for", what, "expires", rec.ExpiresAt, "requester", requester)
	out := enrollmentCode(rec)
	out.Code = code
	return out, nil
}

// makeRoomForEnrollment deletes the codes past their use and refuses a new
// one when enrollment.MaxCodes remain.
func (c *Controller) makeRoomForEnrollment(now time.Time) error {
	recs, err := c.store.ListEnrollments()
	if err != nil {
		return err
	}
	live := 0
	for _, rec := range recs {
		if !enrollment.Prunable(rec, now) {
			live++
			continue
		}
		if _, err := c.store.DeleteEnrollment(rec.ID); err != nil {
			return err
		}
	}
	if live >= enrollment.MaxCodes {
		return fmt.Errorf("%w: %d enrollment codes are held, the most the controller keeps; delete unused ones (edgesetctl enrollment rm ID)",
			api.ErrInvalid, live)
	}
	return nil
}

// ListEnrollments lists the enrollment codes, without their secrets.
func (c *Controller) ListEnrollments(context.Context) ([]api.EnrollmentCode, error) {
	recs, err := c.store.ListEnrollments()
	if err != nil {
		return nil, err
	}
	out := make([]api.EnrollmentCode, 0, len(recs))
	for _, rec := range recs {
		out = append(out, enrollmentCode(rec))
	}
	return out, nil
}

// DeleteEnrollment revokes the code id: it admits nobody from now on.
// The nodes it admitted keep their credentials (token revoke removes
// those).
func (c *Controller) DeleteEnrollment(_ context.Context, id string) error {
	found, err := c.store.DeleteEnrollment(id)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: enrollment code %s", api.ErrNotFound, id)
	}
	c.log.Info("enrollment code deleted", "id", id)
	return nil
}

// Enroll admits the device presenting req.Code: it records the use in the
// same store transaction that checks the code, sets the code's labels on
// the node, and answers with the node's name, MQTT credential and broker
// URLs. Every refusal wraps api.ErrForbidden.
func (c *Controller) Enroll(ctx context.Context, req api.EnrollRequest, src api.EnrollSource) (api.Enrollment, error) {
	id, secret, err := enrollment.Parse(req.Code)
	if err != nil {
		return api.Enrollment{}, fmt.Errorf("%w: %v", api.ErrForbidden, err)
	}
	var pub sealing.PublicKey
	if req.PublicKey != "" { // checked before the code's use is recorded
		if pub, err = sealing.ParsePublicKey(req.PublicKey); err != nil {
			return api.Enrollment{}, fmt.Errorf("%w: publicKey: %v", api.ErrInvalid, err)
		}
	}
	now := c.now()
	c.passMu.Lock() // the name check and the labels stay one step with DeleteNode and UpdateNode
	defer c.passMu.Unlock()
	var node string
	rec, err := c.store.UpdateEnrollment(id, func(rec *store.EnrollmentRecord, found bool) error {
		node = req.Node
		if found && rec.Node != "" && node == "" {
			node = rec.Node
		}
		_, known := c.registry.Input(node)
		if err := enrollment.Claim(rec, found, secret, node, known, now); err != nil {
			return err
		}
		return c.checkNotRevoked(node) // before the use is recorded
	})
	if errors.Is(err, enrollment.ErrRefused) {
		c.log.Warn("enrollment refused", "code", id, "node", req.Node, "source", src.RemoteAddr, "err", err)
		return api.Enrollment{}, fmt.Errorf("%w: %v", api.ErrForbidden, err)
	}
	if err != nil {
		return api.Enrollment{}, err
	}
	if len(rec.Labels) > 0 {
		if err := c.labelEnrolledLocked(node, rec.Labels, now); err != nil {
			return api.Enrollment{}, err
		}
	}
	tok, err := c.MintNodeToken(ctx, node, "enrollment code "+id+" from "+src.RemoteAddr)
	if err != nil {
		return api.Enrollment{}, err
	}
	c.events.add(nodeObject(node), schema.EventNormal, ReasonEnrolled,
		fmt.Sprintf("enrolled with code %s from %s (use %d of %d)", id, src.RemoteAddr, len(rec.Enrolled), rec.Uses))
	if !pub.IsZero() {
		if _, err := c.registerNodeKey(ctx, node, pub, keySourceEnrollment); err != nil {
			return api.Enrollment{}, err
		}
	}
	c.wake()
	out := api.Enrollment{Node: node, Username: tok.Username, Token: tok.Token, Fingerprint: tok.Fingerprint,
		BrokerURLs: c.enrollBrokerURLs(src), Labels: rec.Labels}
	if c.signing != nil && c.signing.root != nil {
		out.TrustRoot = signing.FormatPublicKey(c.signing.root)
	}
	return out, nil
}

// checkNotRevoked refuses a node listed as revoked: the broker would
// refuse the token it would be given.
func (c *Controller) checkNotRevoked(node string) error {
	fleet, err := credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
	if err != nil {
		return err
	}
	switch revoked, err := credential.Revoked(c.cfg.DataDir, fleet, node); {
	case err != nil:
		return err
	case revoked:
		return fmt.Errorf("%w: node %s is revoked; an admin readmits it before it can enroll", enrollment.ErrRefused, node)
	}
	return nil
}

// labelEnrolledLocked sets labels on node as overrides (the node need not
// have announced itself), with passMu held, as UpdateNode does.
func (c *Controller) labelEnrolledLocked(node string, labels map[string]string, now time.Time) error {
	o, err := c.store.UpdateOverrides(node, func(o *store.NodeOverrides) error {
		if o.Labels == nil {
			o.Labels = map[string]*string{}
		}
		for k, v := range labels {
			o.Labels[k] = &v
		}
		o.UpdatedAt = now
		return nil
	})
	if err != nil {
		return err
	}
	c.registry.SetOverrides(node, overridesFromStore(o), o.UpdatedAt)
	c.state.markNode(node)
	return nil
}

// enrollBrokerURLs are the brokers an enrolled device is told to use:
// enroll-broker-url, else the external broker's URLs, else the embedded
// broker's listeners on the host the device reached the API at (TLS
// first when there is a TLS listener).
func (c *Controller) enrollBrokerURLs(src api.EnrollSource) []string {
	if len(c.cfg.EnrollBrokerURLs) > 0 {
		return slices.Clone(c.cfg.EnrollBrokerURLs)
	}
	if urls := c.cfg.brokerURLs(); len(urls) > 0 {
		return urls
	}
	host := src.Host
	if h, _, err := net.SplitHostPort(src.Host); err == nil {
		host = h
	}
	var out []string
	if _, port, err := net.SplitHostPort(c.cfg.MQTTTLSAddr); err == nil && c.cfg.MQTTTLSAddr != "" {
		out = append(out, "ssl://"+net.JoinHostPort(host, port))
	}
	if a, ok := c.transport.Addr().(*net.TCPAddr); ok {
		out = append(out, "tcp://"+net.JoinHostPort(host, fmt.Sprint(a.Port)))
	}
	return out
}

func enrollmentCode(rec store.EnrollmentRecord) api.EnrollmentCode {
	return api.EnrollmentCode{ID: rec.ID, Node: rec.Node, NamePrefix: rec.NamePrefix, Labels: rec.Labels, Uses: rec.Uses,
		Enrolled: rec.Enrolled, Description: rec.Description, CreatedBy: rec.CreatedBy,
		CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, UsedAt: rec.UsedAt}
}
