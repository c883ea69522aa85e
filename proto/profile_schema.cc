#include "proto/profile_schema.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace stepcast {
namespace {

RateOrigin FromProto(v1::RateOrigin o) {
  switch (o) {
    case v1::RATE_ORIGIN_MEASURED: return RateOrigin::kMeasured;
    case v1::RATE_ORIGIN_IMPORTED: return RateOrigin::kImported;
    case v1::RATE_ORIGIN_REFERENCE: return RateOrigin::kReference;
    default: return RateOrigin::kUnknown;
  }
}

v1::RateOrigin ToProto(RateOrigin o) {
  switch (o) {
    case RateOrigin::kMeasured: return v1::RATE_ORIGIN_MEASURED;
    case RateOrigin::kImported: return v1::RATE_ORIGIN_IMPORTED;
    case RateOrigin::kReference: return v1::RATE_ORIGIN_REFERENCE;
    case RateOrigin::kUnknown: break;
  }
  return v1::RATE_ORIGIN_UNKNOWN;
}

absl::Status CountError(const std::string& field, int have, size_t want, const std::string& of) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", have, " entries, but ", of, " has ", want,
                                                 " (one origin per rate, in the same order, or none)"));
}

}  // namespace

absl::Status ProfileVersionError(const std::string& field, int64_t version) {
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat(field, ": ", version, " is not a schema version (>= 0)"));
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": ", version, " is newer than this stepcast reads (profile schema versions 1 to ",
      kRateProfileFormatVersion, "): the profile was written by a newer stepcast; update stepcast, or write the "
      "profile again with this one"));
}

absl::Status ProfileSchemaFromProto(const v1::RateProfile& p, const std::string& prefix, RateProfile& r) {
  if (p.format_version() < 0 || p.format_version() > kRateProfileFormatVersion) {
    return ProfileVersionError(prefix + ".format_version", p.format_version());
  }
  r.format_version = p.format_version();
  const v1::ProfileProvenance& v = p.provenance();
  ProfileProvenance& o = r.provenance;
  o.tool = v.tool();
  o.tool_version = v.tool_version();
  o.created_utc = v.created_utc();
  o.gpu_name = v.gpu_name();
  if (v.gpu_count() < 0) return absl::InvalidArgumentError(prefix + ".provenance.gpu_count: must be >= 0");
  if (v.host_count() < 0) return absl::InvalidArgumentError(prefix + ".provenance.host_count: must be >= 0");
  o.gpu_count = v.gpu_count();
  o.host_count = v.host_count();
  o.hosts.assign(v.hosts().begin(), v.hosts().end());
  o.driver_version = v.driver_version();
  o.cuda_version = v.cuda_version();
  o.nccl_version = v.nccl_version();
  o.base = v.base();
  o.imported_files.assign(v.imported_files().begin(), v.imported_files().end());

  if (p.gemm_origins_size() != 0) {
    if (static_cast<size_t>(p.gemm_origins_size()) != r.gemm.size()) {
      return CountError(prefix + ".gemm_origins", p.gemm_origins_size(), r.gemm.size(), prefix + ".gemm");
    }
    for (int i = 0; i < p.gemm_origins_size(); ++i) r.gemm[i].origin = FromProto(p.gemm_origins(i));
  }
  if (p.collective_origins_size() != 0) {
    if (static_cast<size_t>(p.collective_origins_size()) != r.collectives.size()) {
      return CountError(prefix + ".collective_origins", p.collective_origins_size(), r.collectives.size(),
                        prefix + ".collectives");
    }
    for (int i = 0; i < p.collective_origins_size(); ++i) {
      const v1::CollectiveOrigin& c = p.collective_origins(i);
      CollectiveRate& cr = r.collectives[i];
      cr.origin = FromProto(c.rate());
      if (c.points_size() == 0) continue;
      if (static_cast<size_t>(c.points_size()) != cr.points.size()) {
        return CountError(absl::StrCat(prefix, ".collective_origins[", i, "].points"), c.points_size(), cr.points.size(),
                          absl::StrCat(prefix, ".collectives[", i, "].points"));
      }
      for (int j = 0; j < c.points_size(); ++j) cr.points[j].origin = FromProto(c.points(j));
    }
  }
  r.attention_origin = FromProto(p.attention_origin());
  r.hbm_origin = FromProto(p.hbm_origin());
  return absl::OkStatus();
}

void ProfileSchemaToProto(const RateProfile& r, v1::RateProfile& p) {
  p.set_format_version(kRateProfileFormatVersion);
  const ProfileProvenance& o = r.provenance;
  const bool any_provenance = !o.tool.empty() || !o.tool_version.empty() || !o.created_utc.empty() ||
                              !o.gpu_name.empty() || o.gpu_count > 0 || o.host_count > 0 || !o.hosts.empty() ||
                              !o.driver_version.empty() || !o.cuda_version.empty() || !o.nccl_version.empty() ||
                              !o.base.empty() || !o.imported_files.empty();
  if (any_provenance) {
    v1::ProfileProvenance* v = p.mutable_provenance();
    v->set_tool(o.tool);
    v->set_tool_version(o.tool_version);
    v->set_created_utc(o.created_utc);
    v->set_gpu_name(o.gpu_name);
    v->set_gpu_count(o.gpu_count);
    v->set_host_count(o.host_count);
    for (const auto& h : o.hosts) v->add_hosts(h);
    v->set_driver_version(o.driver_version);
    v->set_cuda_version(o.cuda_version);
    v->set_nccl_version(o.nccl_version);
    v->set_base(o.base);
    for (const auto& f : o.imported_files) v->add_imported_files(f);
  }
  bool gemm_known = false;
  for (const auto& g : r.gemm) gemm_known |= g.origin != RateOrigin::kUnknown;
  if (gemm_known) {
    for (const auto& g : r.gemm) p.add_gemm_origins(ToProto(g.origin));
  }
  bool coll_known = false;
  for (const auto& c : r.collectives) {
    coll_known |= c.origin != RateOrigin::kUnknown;
    for (const auto& pt : c.points) coll_known |= pt.origin != RateOrigin::kUnknown;
  }
  if (coll_known) {
    for (const auto& c : r.collectives) {
      v1::CollectiveOrigin* x = p.add_collective_origins();
      x->set_rate(ToProto(c.origin));
      bool points_known = false;
      for (const auto& pt : c.points) points_known |= pt.origin != RateOrigin::kUnknown;
      if (points_known) {
        for (const auto& pt : c.points) x->add_points(ToProto(pt.origin));
      }
    }
  }
  p.set_attention_origin(ToProto(r.attention_origin));
  p.set_hbm_origin(ToProto(r.hbm_origin));
}

std::optional<absl::Status> NewerProfileVersionError(absl::string_view text, absl::string_view origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  if (!root.IsMap()) return std::nullopt;
  const YAML::Node& map = root;
  for (const char* key : {"format_version", "formatVersion"}) {
    const YAML::Node v = map[key];
    if (!v || !v.IsScalar()) continue;
    int64_t version = 0;
    if (!absl::SimpleAtoi(v.Scalar(), &version) || version <= kRateProfileFormatVersion) return std::nullopt;
    absl::Status s = ProfileVersionError(std::string(key), version);
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  return std::nullopt;
}

}  // namespace stepcast
