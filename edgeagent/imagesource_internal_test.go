package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/schema"
)

// pullRuntime is a Runtime of which only PullImage may be called: the
// image is present or not, and a pull fails with pullErr.
type pullRuntime struct {
	Runtime
	present bool
	pullErr error
	pulls   []string // policies pulled with
}

func (r *pullRuntime) PullImage(_ context.Context, image, policy string, _ *RegistryAuth) error {
	r.pulls = append(r.pulls, policy)
	if policy == schema.PullNever {
		if r.present {
			return nil
		}
		return fmt.Errorf("pull image %s: %w", image, ErrImageNotPresent)
	}
	return r.pullErr
}

// fetcher records fetches and fails them with err.
type fetcher struct {
	err     error
	fetched []string
}

func (f *fetcher) FetchImage(_ context.Context, image string) error {
	f.fetched = append(f.fetched, image)
	return f.err
}

func TestPullImageSource(t *testing.T) {
	registryDown := errors.New("dial registry: no route to host")
	notStored := errors.New("fetch image app:v1 from the controller: not in the image store")
	cases := []struct {
		name       string
		source     string
		policy     string
		present    bool
		pullErr    error
		noFetcher  bool
		fetchErr   error
		wantFetch  bool
		wantErr    []error
		wantErrMsg string
	}{
		{name: "registry pull works", policy: schema.PullIfNotPresent},
		{name: "registry fails, controller has it", policy: schema.PullIfNotPresent, pullErr: registryDown, wantFetch: true},
		{name: "registry fails, controller neither", policy: schema.PullAlways, pullErr: registryDown, fetchErr: notStored, wantFetch: true, wantErr: []error{registryDown, notStored}},
		{name: "registry fails, no fetcher", policy: schema.PullIfNotPresent, pullErr: registryDown, noFetcher: true, wantErr: []error{registryDown}},
		{name: "policy Never never fetches", policy: schema.PullNever, pullErr: ErrImageNotPresent, wantErr: []error{ErrImageNotPresent}},
		{name: "controller source, image present", source: schema.ImageSourceController, present: true},
		{name: "controller source, image absent", source: schema.ImageSourceController, pullErr: registryDown, wantFetch: true},
		{name: "controller source, fetch fails", source: schema.ImageSourceController, fetchErr: notStored, wantFetch: true, wantErr: []error{notStored}},
		{name: "controller source, no fetcher", source: schema.ImageSourceController, noFetcher: true, wantErrMsg: "set image-url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &pullRuntime{present: tc.present, pullErr: tc.pullErr}
			f := &fetcher{err: tc.fetchErr}
			a := &Agent{rt: rt, log: slog.New(slog.DiscardHandler)}
			if !tc.noFetcher {
				a.cfg.Images = f
			}
			err := a.pullImage(t.Context(), ContainerSpec{Image: "app:v1"}, schema.Container{Image: "app:v1", ImagePullPolicy: tc.policy}, tc.source)
			for _, want := range tc.wantErr {
				assert.ErrorIs(t, err, want)
			}
			if tc.wantErrMsg != "" {
				assert.ErrorContains(t, err, tc.wantErrMsg)
			}
			if len(tc.wantErr) == 0 && tc.wantErrMsg == "" {
				assert.NoError(t, err)
			}
			if tc.wantFetch {
				assert.Equal(t, []string{"app:v1"}, f.fetched)
			} else {
				assert.Empty(t, f.fetched)
			}
			if tc.source == schema.ImageSourceController {
				assert.Equal(t, []string{schema.PullNever}, rt.pulls, "a controller-sourced image is never pulled from a registry")
			}
		})
	}
}
