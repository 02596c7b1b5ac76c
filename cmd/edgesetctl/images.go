package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/imagestore"
)

func newImageCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Push, list and remove images of the controller's image store (sites without a registry)",
		Long: `The controller keeps an image store for devices that cannot reach a registry.
An agent started with --image-url fetches an image from it when its pull
fails, or always for a daemonset (apiVersion edgeset.io/v1) whose template
says imageSource: controller. A node may fetch only the images its desired
state references. Images no daemonset revision references are collected
once --image-gc-grace has passed since their push, or sooner when a push
needs the room (--image-quota).`,
	}
	cmd.AddCommand(newImagePushCmd(s), newImageListCmd(s), newImageRemoveCmd(s))
	return cmd
}

// imagePushOptions are image push's flags.
type imagePushOptions struct {
	file       string
	name       string
	dockerHost string
}

func newImagePushCmd(s *streams) *cobra.Command {
	var o imagePushOptions
	cmd := &cobra.Command{
		Use:   "push (IMAGE | --file ARCHIVE [--name IMAGE])",
		Short: "Upload an image from the local Docker engine, or a docker save / OCI image-layout archive",
		Long: `push IMAGE saves IMAGE from the local Docker engine (DOCKER_HOST, or
--docker-host) and streams it to the controller. push --file ARCHIVE sends a
docker save archive (optionally gzip-compressed) or an OCI image-layout
archive; --name names its image when the archive carries no name (or to
push it under another). The controller checks every digest before any of
it is stored.`,
		Example: `  edgesetctl image push registry.example.com/edge/collector:1.4
  docker save collector:1.4 | gzip > collector.tar.gz
  edgesetctl image push --file collector.tar.gz
  edgesetctl image push --file collector-oci.tar --name collector:1.4`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.file == "" && len(args) != 1:
				return usageError{errors.New("image push: give IMAGE, or --file ARCHIVE")}
			case o.file != "" && len(args) != 0:
				return usageError{errors.New("image push: give IMAGE or --file ARCHIVE, not both (--name names the archive's image)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			images, err := pushImage(cmd.Context(), c, o, args)
			if err != nil {
				return cfg.explain(err)
			}
			for _, im := range images {
				fmt.Fprintf(s.out, "pushed %s %s (%s, %d layers)\n", imagestore.Familiar(im.Name), im.Digest, telemetry.Bytes(im.Size), im.Layers)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "docker save or OCI image-layout archive to push (- for stdin)")
	cmd.Flags().StringVar(&o.name, "name", "", "name of the archive's image (required when it has none)")
	cmd.Flags().StringVar(&o.dockerHost, "docker-host", "", "Docker engine to save IMAGE from (default: DOCKER_HOST or the local socket)")
	return cmd
}

// pushImage streams the archive (a file, stdin, or the engine's image
// save) to the controller.
func pushImage(ctx context.Context, c *api.Client, o imagePushOptions, args []string) ([]api.Image, error) {
	if o.file != "" {
		var r io.Reader = os.Stdin
		if o.file != "-" {
			f, err := os.Open(o.file)
			if err != nil {
				return nil, fmt.Errorf("image push: %w", err)
			}
			defer f.Close()
			r = f
		}
		return c.PushImage(ctx, r, o.name)
	}
	image := args[0]
	opts := []client.Opt{client.FromEnv}
	if o.dockerHost != "" {
		opts = append(opts, client.WithHost(o.dockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("image push %s: docker engine: %w", image, err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return nil, fmt.Errorf("image push %s: the local Docker engine (%s) has no such image: %w", image, cli.DaemonHost(), err)
	}
	saved, err := cli.ImageSave(ctx, []string{image})
	if err != nil {
		return nil, fmt.Errorf("image push %s: docker save: %w", image, err)
	}
	defer saved.Close()
	// The archive tags the image as the engine knows it; name it as given,
	// so that it is stored under the name the daemonsets use.
	return c.PushImage(ctx, saved, image)
}

func newImageListCmd(s *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images of the controller's image store",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			list, err := c.ListImages(cmd.Context())
			if err != nil {
				return cfg.explain(err)
			}
			switch output {
			case "json":
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			case "":
				printImages(s.out, list, s.now())
				return nil
			}
			return usageError{fmt.Errorf("image ls: -o %q: want json or nothing", output)}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: the list as the API returns it")
	return cmd
}

// printImages prints the table of image ls, aged at now.
func printImages(w io.Writer, list api.ImageList, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE\tLAYERS\tAGE\tUSED BY")
	for _, im := range list.Images {
		users := "<none>"
		if len(im.UsedBy) > 0 {
			users = fmt.Sprint(im.UsedBy)
			users = users[1 : len(users)-1]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", imagestore.Familiar(im.Name), shortDigest(im.Digest),
			telemetry.Bytes(im.Size), im.Layers, age(im.Pushed, now), users)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "store: %s of %s used\n", telemetry.Bytes(list.Used), telemetry.Bytes(list.Quota))
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func newImageRemoveCmd(s *streams) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm IMAGE...",
		Aliases: []string{"remove"},
		Short:   "Remove images from the controller's image store",
		Long: `rm removes an image and the layers no other image shares. An image a
daemonset revision references is refused unless --force: nodes that still
need it could no longer fetch it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			var errs []error
			for _, name := range args {
				im, err := c.RemoveImage(cmd.Context(), name, force)
				if err != nil {
					errs = append(errs, cfg.explain(err))
					continue
				}
				fmt.Fprintf(s.out, "removed %s %s\n", imagestore.Familiar(im.Name), im.Digest)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove even an image a daemonset revision references")
	return cmd
}
