// Package imagestore is the controller's content-addressed image store:
// container images pushed by an operator (edgesetctl image push) for
// devices that cannot reach a registry.
//
// On disk, under the store's directory:
//
//	blobs/sha256/<hex>   manifests, image configs and layers, each named by
//	                     the sha256 of its content
//	images/<hex>.json    one file per image name (hex is the sha256 of the
//	                     name): the name, its manifest digest, when pushed.
//	                     A name is a tag ("docker.io/library/app:v1") or,
//	                     for an image a revision pins whose tag was pushed
//	                     again with other content, a digest reference
//	                     ("docker.io/library/app@sha256:..."), kept while
//	                     a revision pins it (Options.InUse)
//	tmp/                 uploads being received; emptied on Open
//
// Invariants, kept by the Store's methods:
//
//   - A blob is visible under blobs/ only once its whole content has been
//     received, its digest checked, and the file synced: it is written under
//     tmp/, fsynced, then renamed. A crash leaves at most files in tmp/,
//     removed on the next Open.
//   - An image file is written (temporary file, fsync, rename, directory
//     fsync) only after every blob it references is in blobs/; a blob is
//     removed only when no image references it.
//   - The bytes under blobs/ never exceed Options.Quota: an upload that
//     would cross it first collects unreferenced images (Options.InUse),
//     and is refused with ErrQuota if that is not enough.
package imagestore
