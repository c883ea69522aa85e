// File: proto/launch_data.h
//
// The launch importers' data files, compiled in (proto/embed_launch_data.cmake): the torchtitan
// config registries (presets/torchtitan_configs/*.toml), Megatron-Bridge and NeMo 2 recipes and
// Megatron-LM's argument list (presets/launchers/). Each file names the repository commit it was
// read from in its header.
#ifndef STEPCAST_PROTO_LAUNCH_DATA_H_
#define STEPCAST_PROTO_LAUNCH_DATA_H_

#include <string>
#include <vector>

namespace stepcast {

struct EmbeddedLaunchFile {
  const char* path;  // relative to presets/ ("launchers/megatron_args.txt")
  const char* text;
};
const std::vector<EmbeddedLaunchFile>& EmbeddedLaunchData();

// The text of one embedded file by its path relative to presets/; nullptr when there is none.
const char* LaunchDataFile(const std::string& path);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_DATA_H_
