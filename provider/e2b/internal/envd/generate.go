// Package envd holds the Go code generated from E2B envd's official
// protocol buffers: process/process.proto and filesystem/filesystem.proto,
// copied verbatim from github.com/e2b-dev/E2B at commit
// b8029973aa7da5f741f7bb1a9f833b38a0885438 (spec/envd/), the version the e2b npm SDK 2.51.0 embeds (its
// serialized descriptors are checked against these files by
// provider/e2b's TestSDKDescriptors).
//
// Regenerate with protoc and the two plugins from the module proxy:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.8
//	go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.19.1
//	go generate ./provider/e2b/internal/envd/
package envd

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go_opt=Mprocess/process.proto=github.com/d10ffeed/corral/provider/e2b/internal/envd/process --go_opt=Mfilesystem/filesystem.proto=github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem --connect-go_out=. --connect-go_opt=paths=source_relative --connect-go_opt=Mprocess/process.proto=github.com/d10ffeed/corral/provider/e2b/internal/envd/process --connect-go_opt=Mfilesystem/filesystem.proto=github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem process/process.proto filesystem/filesystem.proto
