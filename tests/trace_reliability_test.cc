// Reliability of the Kineto trace reader (reliability review 2, N6, N10, N13, N15; issue 26):
// a gzip bomb and a huge string are refused with the bound named and bounded memory; a FIFO, a
// device or a directory is refused, not read; timestamps whose microseconds overflow int64
// nanoseconds are refused; a binary file and a ts given as an array are named as such; the
// records running at each window's start are found without scanning back from the trace's start.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugin/probe/trace_analysis.h"
#include "plugin/trace/kineto_trace.h"
#include "tests/trace_builder.h"

namespace stepcast::trace {
namespace {

using stepcast::testing::TraceBuilder;

// Peak RSS of this process, bytes.
int64_t PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// N6: one kernel name of 256 MiB in a 256 KiB gzip file (gen_kineto_big.py bomb): RapidJSON
// buffered the whole string, so the read took 5.3 GB for 1 GiB. Now the string bound (16 MiB)
// stops it, and past 64 MiB of JSON the decompression ratio (100x) would too.
TEST(TraceReliability, GzipBombNameIsRefusedWithBoundedMemory) {
  const std::string path = ::testing::TempDir() + "bomb.json.gz";
  {
    gzFile f = gzopen(path.c_str(), "wb9");
    const std::string head = R"({"traceEvents":[{"ph":"X","cat":"kernel","name":")";
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    const std::string chunk(1 << 20, 'A');
    for (int i = 0; i < 256; ++i) gzwrite(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    const std::string tail = R"(","pid":0,"tid":7,"ts":1,"dur":1,"args":{"stream":7}}]})";
    gzwrite(f, tail.data(), static_cast<unsigned>(tail.size()));
    gzclose(f);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 1 << 20);
  const int64_t before = PeakRssBytes();
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("max_string_bytes"));
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr(path));
  // The 256 MiB name is never held: the peak grows by less than 64 MiB.
  EXPECT_LT(PeakRssBytes() - before, int64_t{64} << 20);
}

// N6, the ratio: a file that inflates beyond max_decompression_ratio past 64 MiB is refused
// (this one: 80 MiB of whitespace-separated events in a file ~300 KiB).
TEST(TraceReliability, DecompressionRatioIsBounded) {
  const std::string path = ::testing::TempDir() + "ratio.json.gz";
  {
    gzFile f = gzopen(path.c_str(), "wb9");
    const std::string head = R"({"traceEvents":[)";
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    const std::string pad(1 << 20, ' ');
    for (int i = 0; i < 80; ++i) gzwrite(f, pad.data(), static_cast<unsigned>(pad.size()));
    gzwrite(f, "]}", 2);
    gzclose(f);
  }
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("max_decompression_ratio"));
  // With the bound raised the same file reads to its end (no GPU record in it).
  KinetoOptions o;
  o.max_decompression_ratio = 1e6;
  EXPECT_EQ(ReadKinetoTrace(path, o).status().code(), absl::StatusCode::kFailedPrecondition);
  o.max_json_bytes = 1 << 20;
  EXPECT_THAT(ReadKinetoTrace(path, o).status().message(), ::testing::HasSubstr("max_json_bytes"));
}

// Many distinct long names (gen_kineto_big.py names): bounded by max_name_bytes; names are kept
// to 4 KiB each.
TEST(TraceReliability, DistinctNamesAreBounded) {
  TraceBuilder b;
  const std::string pad(10000, 'B');
  for (int i = 0; i < 20; ++i) b.Kernel(std::to_string(i) + pad, -1, i * 10, 1, 7);
  const std::string path = b.Write("names.json");
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  for (const std::string& n : t->names) EXPECT_EQ(n.size(), 4096u);
  KinetoOptions o;
  o.max_name_bytes = 50000;
  EXPECT_THAT(ReadKinetoTrace(path, o).status().message(), ::testing::HasSubstr("max_name_bytes"));
  o = {};
  o.max_records = 5;
  EXPECT_THAT(ReadKinetoTrace(path, o).status().message(), ::testing::HasSubstr("max_records"));
}

// N10 / issue 26: only regular files. A FIFO blocked the reader for ever; /dev/zero never ends.
TEST(TraceReliability, NonRegularFilesAreRefused) {
  const std::string fifo = ::testing::TempDir() + "trace_fifo.json";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  for (const std::string& p : {fifo, std::string("/dev/zero"), std::string("/dev/null"), ::testing::TempDir()}) {
    SCOPED_TRACE(p);
    absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(p);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), ::testing::HasSubstr("not a regular file"));
  }
  ::unlink(fifo.c_str());
}

// N13: ts up to 9,223,372,036,854,779 us passed the old bound and whole * 1000 overflowed; ts +
// dur overflowed in Times() (ts_mul_overflow.json, ts_dur_overflow.json: accepted with exit 0).
TEST(TraceReliability, TimestampOverflowIsRefused) {
  auto ns = [](const char* s) { return MicrosTextToNs(s, std::strlen(s)); };
  EXPECT_FALSE(ns("9223372036854779").ok());
  EXPECT_FALSE(ns("9223372036854775").ok());
  EXPECT_FALSE(ns("-9223372036854775").ok());
  EXPECT_FALSE(ns("99999999999999999999999").ok());
  EXPECT_FALSE(ns("4.7e15").ok());
  EXPECT_EQ(*ns("1740461679470813"), 1740461679470813000);  // the DeepSeek trace's epoch microseconds
  EXPECT_EQ(*ns("4611686018427387"), 4611686018427387000);  // just inside kMaxAbsNs
  TraceBuilder ok;
  ok.Kernel("k", -1, 100, 5, 7);
  for (const char* bad : {R"("ts":9223372036854775,"dur":5)", R"("ts":4611686018427000,"dur":4611686018427000)"}) {
    SCOPED_TRACE(bad);
    const std::string json = std::string(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k",)") + bad +
                             R"(,"args":{"stream":7}}]})";
    absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(TraceBuilder::WriteText("overflow.json", json));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), ::testing::AnyOf(::testing::HasSubstr("out of range"), ::testing::HasSubstr("past")));
  }
}

// N15: a binary file read "byte 0 of the JSON: The document is empty"; ts as an array or
// object read "has no ts".
TEST(TraceReliability, BinaryFilesAndNonNumberTimesAreNamed) {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(TraceBuilder::WriteText("binary.json", binary));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("NUL"));
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("binary"));
  for (const char* v : {"[1,2]", R"({"a":1})"}) {
    const std::string json =
        std::string(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":)") + v + R"(,"dur":1}]})";
    absl::StatusOr<KinetoTrace> r = ReadKinetoTrace(TraceBuilder::WriteText("ts_array.json", json));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(v[0] == '[' ? "ts is an array" : "ts is an object"));
  }
}

// N6, the quadratic scan: each window scanned back as far as the longest record (one long
// memcpy: every window from the trace's start; 60,000 steps took 39 s instead of 1.8 s,
// docs/TRACES.md has the timing). The index visits only the records that run at a time, and the
// windows' figures equal the look-back scan's.
TEST(TraceReliability, RunningRecordsFoundWithoutScanningBack) {
  std::vector<probe::KernelRecord> k;
  k.push_back({0, 10'000'000, 0, probe::KernelCategory::kMemory, 0});  // one long copy
  for (int i = 0; i < 10000; ++i) {
    k.push_back({1000 + int64_t{i} * 1000, 1000 + int64_t{i} * 1000 + 500, 1, probe::KernelCategory::kGemm, 0});
  }
  const probe::RunningIndex index(k);
  for (int64_t t : {int64_t{1250}, int64_t{5'000'100}, int64_t{9'999'999}, int64_t{12'000'000}}) {
    const size_t limit = static_cast<size_t>(
        std::lower_bound(k.begin(), k.end(), t, [](const probe::KernelRecord& r, int64_t v) { return r.start_ns < v; }) -
        k.begin());
    std::vector<size_t> got, want;
    index.ForEachEndingAfter(k, limit, t, [&](size_t i) { got.push_back(i); });
    for (size_t i = 0; i < limit; ++i) {
      if (k[i].end_ns > t) want.push_back(i);
    }
    EXPECT_EQ(got, want) << t;
  }
  for (int64_t a : {int64_t{0}, int64_t{1250}, int64_t{777'777}, int64_t{9'000'000}}) {
    const v1::StepMeasurement x = probe::AnalyzeWindow(k, index, a, a + 3000);
    const v1::StepMeasurement y = probe::AnalyzeWindow(k, a, a + 3000, probe::MaxDurationNs(k));
    EXPECT_EQ(x.SerializeAsString(), y.SerializeAsString()) << a;
  }
}

}  // namespace
}  // namespace stepcast::trace
