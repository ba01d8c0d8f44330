// `lucid bench pairs|merge`: the pair benchmark. Each pair runs the same `lucid train` options twice
// as fresh processes of this binary: the native arm, and the replay arm with the chosen capture_*
// options on. Pairs alternate which arm runs first (odd pairs native first, even pairs replay first)
// so that drift of the machine cancels. Each fit's fit_report.json gives its complete-fit time, peak
// memory and the SHA-256 of its state bytes; the parent times each whole process. Records go to
// OUT/pairs.jsonl as each fit ends (a later call with the same out= continues them, `merge` joins
// the records of several folders) and the summary to OUT/summary.{md,json} and standard output.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/train/fit_report.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/stats.h"

extern char** environ;

namespace lucid::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const std::vector<std::string> kCaptureOptions = {"capture_network", "capture_segment_heads", "capture_optimizer",
                                                  "capture_step"};
const std::vector<std::string> kHashKinds = {"model", "optimizer", "scheduler", "ema", "step_losses", "validation"};
const std::vector<std::string> kArms = {"native", "replay"};
constexpr const char* kRecords = "pairs.jsonl";

config::Options pairs_options() {
  return config::Options(
      "bench pairs",
      {
          {"pairs", "5", "native/replay pairs to run"},
          {"replay", "capture_network,capture_segment_heads,capture_optimizer",
           "the capture options the replay arm turns on (comma list; step is short for capture_step)"},
          {"out", "", "folder for logs, records and the summary (created; its records are continued)"},
          {"runs", "", "parent folder of the fits' run directories (default OUT/runs)"},
          {"first_pair", "", "number of the first pair (default: after the records in OUT); odd: native first"},
      });
}

config::Options merge_options() {
  return config::Options("bench merge", {
                                            {"from", "", "comma list of folders written by lucid bench pairs"},
                                            {"out", "", "folder for the joined records and summary (created)"},
                                        });
}

const char* kUsage =
    "usage: lucid bench pairs out=DIR [pairs=5] [replay=LIST] [runs=DIR] [first_pair=N] [lucid train options...]\n"
    "       lucid bench merge from=DIR1,DIR2,... out=DIR\n"
    "       lucid bench predict model=W [batch=1,16] [imgsz=640] [device=0] (predict latency and throughput)\n"
    "pairs: fresh-process native and replay fits of the same `lucid train` options, in alternating order;\n"
    "prints complete-fit and whole-process seconds, peak memory and whether every state hash matched.\n"
    "Every key that is not a bench option goes to `lucid train` for both arms.\n";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<json> read_records(const fs::path& dir) {
  std::vector<json> out;
  std::ifstream in(dir / kRecords);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(json::parse(line));
    } catch (const std::exception& e) {
      throw UserError((dir / kRecords).string() + ":" + std::to_string(n) + ": not a fit record (" + e.what() + ")");
    }
  }
  return out;
}

void append_record(const fs::path& dir, const json& record) {
  std::ofstream out(dir / kRecords, std::ios::app);
  out << record.dump() << "\n";
  if (!out.flush()) throw UserError((dir / kRecords).string() + ": cannot append");
}

// ---------------------------------------------------------------------------------------------
// Summary

struct Stat : util::Spread {
  std::vector<double> values;
};

Stat stat_of(const std::vector<double>& v) { return Stat{util::spread(v), v}; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string cell(const Stat& s, const char* f) {
  return fmt(f, s.median) + " (" + fmt(f, s.min) + "\u2013" + fmt(f, s.max) + ")";
}

std::string short_hash(const std::string& h) { return h.substr(0, 16); }

// Writes OUT/summary.{md,json} from the records and returns the Markdown (also printed).
// Returns in `mismatch` the hash kinds that differ anywhere.
std::string summarise(const fs::path& out_dir, const std::vector<json>& records, std::vector<std::string>& mismatch) {
  // Only complete pairs count: a pair cut short (e.g. by a time limit) would unbalance the arms.
  std::map<int64_t, std::map<std::string, json>> by_pair;
  for (const auto& r : records) by_pair[r.at("pair").get<int64_t>()][r.at("arm").get<std::string>()] = r;
  std::vector<json> fits;
  std::vector<int64_t> incomplete;
  for (const auto& [pair, arms] : by_pair) {
    if (arms.size() != kArms.size()) {
      incomplete.push_back(pair);
      continue;
    }
    for (const auto& a : kArms) fits.push_back(arms.at(a));
  }
  const size_t pairs = fits.size() / 2;
  std::map<std::string, std::map<std::string, Stat>> stats;  // arm -> measure -> stat
  for (const auto& arm : kArms)
    for (const char* m : {"fit_seconds", "whole_process_seconds", "peak_allocated_mib", "peak_reserved_mib"}) {
      std::vector<double> v;
      for (const auto& f : fits)
        if (f.at("arm") == arm) v.push_back(f.at(m).get<double>());
      stats[arm][m] = stat_of(v);
    }

  std::ostringstream md;
  const auto settings = records.empty() ? json::object() : records.front().at("settings");
  md << "# Pair benchmark\n\n";
  md << "`lucid train";
  for (const auto& t : settings.value("train", json::array())) md << " " << t.get<std::string>();
  md << "`; replay arm: ";
  std::string replay_list;
  for (const auto& t : settings.value("replay", json::array())) {
    if (!replay_list.empty()) replay_list += ", ";
    replay_list += t.get<std::string>() + "=True";
  }
  md << replay_list << ".\n\n";
  md << pairs << " complete pair(s), fresh processes, odd pairs native first, even pairs replay first";
  if (!incomplete.empty()) {
    md << "; incomplete pair(s) left out:";
    for (auto p : incomplete) md << " " << p;
  }
  md << ".\n\n";
  md << "| pair | arm | ran | complete fit s | whole process s | peak allocated / reserved MiB | batches | optimizer "
        "steps |\n";
  md << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& f : fits)
    md << "| " << f.at("pair").get<int64_t>() << " | " << f.at("arm").get<std::string>() << " | "
       << (f.at("ran_first").get<bool>() ? "first" : "second") << " | "
       << fmt("%.3f", f.at("fit_seconds").get<double>()) << " | "
       << fmt("%.3f", f.at("whole_process_seconds").get<double>()) << " | "
       << fmt("%.0f", f.at("peak_allocated_mib").get<double>()) << " / "
       << fmt("%.0f", f.at("peak_reserved_mib").get<double>()) << " | " << f.at("batches").get<int64_t>() << " | "
       << f.at("optimizer_steps").get<int64_t>() << " |\n";
  for (const auto& f : fits)
    if (!f.at("replay").empty())
      md << "\nreplay summary, pair " << f.at("pair").get<int64_t>() << " " << f.at("arm").get<std::string>() << ": `"
         << f.at("replay").dump() << "`\n";

  md << "\n| Seconds, median (range) | Native | Replay |\n|---|---|---|\n";
  md << "| Complete fit | " << cell(stats["native"]["fit_seconds"], "%.3f") << " | "
     << cell(stats["replay"]["fit_seconds"], "%.3f") << " |\n";
  md << "| Whole process | " << cell(stats["native"]["whole_process_seconds"], "%.3f") << " | "
     << cell(stats["replay"]["whole_process_seconds"], "%.3f") << " |\n";
  md << "\n| MiB, median (range) | Native | Replay |\n|---|---|---|\n";
  md << "| Peak allocated | " << cell(stats["native"]["peak_allocated_mib"], "%.0f") << " | "
     << cell(stats["replay"]["peak_allocated_mib"], "%.0f") << " |\n";
  md << "| Peak reserved | " << cell(stats["native"]["peak_reserved_mib"], "%.0f") << " | "
     << cell(stats["replay"]["peak_reserved_mib"], "%.0f") << " |\n\n";

  json ratios = json::object();
  for (auto [key, label] : {std::pair{"fit_seconds", "complete fit"}, {"whole_process_seconds", "whole process"}}) {
    const double n = stats["native"][key].median, r = stats["replay"][key].median;
    if (n > 0 && r > 0) {
      ratios[key] = {{"native_over_replay", n / r}, {"change_percent", (r / n - 1.0) * 100.0}};
      md << "Median " << label << ", replay against native: " << fmt("%+.2f", (r / n - 1.0) * 100.0)
         << "% time; speed ratio native/replay " << fmt("%.3f", n / r) << "x.\n";
    }
  }

  md << "\n| SHA-256 of | native (first 16 hex) | replay (first 16 hex) | within native | within replay | across arms "
        "|\n";
  md << "|---|---|---|---|---|---|\n";
  json hashes = json::object();
  mismatch.clear();
  for (const auto& kind : kHashKinds) {
    std::map<std::string, std::set<std::string>> distinct;
    for (const auto& f : fits)
      distinct[f.at("arm").get<std::string>()].insert(f.at("sha256").at(kind).get<std::string>());
    std::set<std::string> all;
    for (const auto& [arm, set] : distinct) all.insert(set.begin(), set.end());
    auto list = [&](const std::set<std::string>& s) {
      std::string out;
      for (const auto& h : s) {
        if (!out.empty()) out += ' ';
        out += short_hash(h);
      }
      return out;
    };
    const bool wn = distinct["native"].size() == 1, wr = distinct["replay"].size() == 1, across = all.size() == 1;
    if (!across) mismatch.push_back(kind);
    md << "| " << kind << " | " << list(distinct["native"]) << " | " << list(distinct["replay"]) << " | "
       << (wn ? "match" : "DIFFER") << " | " << (wr ? "match" : "DIFFER") << " | " << (across ? "match" : "DIFFER")
       << " |\n";
    hashes[kind] = {{"native", distinct["native"]},
                    {"replay", distinct["replay"]},
                    {"within_native", wn},
                    {"within_replay", wr},
                    {"across_arms", across}};
  }
  const bool all_match = mismatch.empty() && pairs > 0;
  md << "\nEvery hash matched within and across arms (" << fits.size() << " fits): " << (all_match ? "yes" : "NO")
     << "\n";

  json summary;
  summary["settings"] = settings;
  summary["complete_pairs"] = pairs;
  summary["incomplete_pairs"] = incomplete;
  for (const auto& arm : kArms)
    for (auto& [m, s] : stats[arm])
      summary["arms"][arm][m] = {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"values", s.values}};
  summary["ratios"] = ratios;
  summary["sha256"] = hashes;
  summary["all_hashes_match"] = all_match;
  summary["fits"] = fits;
  util::write_atomically((out_dir / "summary.json").string(), [&](std::ostream& o) { o << summary.dump(2) << "\n"; });
  util::write_atomically((out_dir / "summary.md").string(), [&](std::ostream& o) { o << md.str(); });
  return md.str();
}

int finish(const fs::path& out_dir, const std::vector<json>& records) {
  std::vector<std::string> mismatch;
  std::cout << "\n" << summarise(out_dir, records, mismatch) << std::flush;
  if (!mismatch.empty()) {
    std::string kinds;
    for (const auto& k : mismatch) {
      if (!kinds.empty()) kinds += ", ";
      kinds += k;
    }
    throw UserError("fits computed different bytes (" + kinds + "); see " + (out_dir / "summary.md").string());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Running fits

struct ChildResult {
  int exit_code = 0;  // 128 + signal when killed
  double seconds = 0;
};

ChildResult run_child(const std::string& exe, const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const auto start = std::chrono::steady_clock::now();
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw UserError("cannot start " + exe + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw UserError(std::string("waiting for a fit: ") + std::strerror(errno));
  ChildResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

json read_report(const fs::path& path, const fs::path& log) {
  std::ifstream in(path);
  if (!in) throw UserError(path.string() + ": the fit wrote no report; see " + log.string());
  json r;
  try {
    r = json::parse(in);
  } catch (const std::exception& e) {
    throw UserError(path.string() + ": unreadable fit report (" + e.what() + ")");
  }
  if (r.value("format", "") != engine::kFitReportFormat)
    throw UserError(path.string() + ": not a " + std::string(engine::kFitReportFormat) + " report");
  return r;
}

std::string pair_name(int64_t pair, const std::string& arm) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "pair-%02lld-%s", static_cast<long long>(pair), arm.c_str());
  return buf;
}

int pairs_command(const std::vector<std::string>& args) {
  auto options = pairs_options();
  std::vector<std::string> bench_tokens, train_tokens;
  std::set<std::string> bench_keys;
  for (const auto& s : options.specs()) bench_keys.insert(s.key);
  for (const auto& t : args) (bench_keys.count(t.substr(0, t.find('='))) ? bench_tokens : train_tokens).push_back(t);
  options.parse(bench_tokens);
  // Both arms must train with the same options except the capture switches the bench sets.
  for (const auto& t : train_tokens) {
    const auto key = t.substr(0, t.find('='));
    for (const char* reserved : {"project", "name", "exist_ok", "resume"})
      if (key == reserved) throw UserError("option " + key + ": set by lucid bench pairs for each fit (see runs=)");
    if (std::find(kCaptureOptions.begin(), kCaptureOptions.end(), key) != kCaptureOptions.end())
      throw UserError("option " + key + ": the replay arm's capture options are chosen with replay=");
  }
  {
    auto train = engine::train_options();
    train.parse(train_tokens);
    engine::TrainSettings::from(train);  // bad values fail here, before any fit
  }
  auto replay = split_list(options.str("replay"));
  if (replay.empty())
    throw UserError(
        "option replay: name at least one of capture_network, capture_segment_heads, capture_optimizer, "
        "capture_step (or step)");
  for (auto& r : replay) {
    if (r == "step") r = "capture_step";
    if (std::find(kCaptureOptions.begin(), kCaptureOptions.end(), r) == kCaptureOptions.end())
      throw UserError("option replay: unknown capture option '" + r +
                      "' (expected capture_network, capture_segment_heads, capture_optimizer or capture_step)");
  }
  const long long pairs = options.integer("pairs");
  if (pairs < 1) throw UserError("option pairs: must be at least 1");
  if (options.str("out").empty()) throw UserError("option out: required (folder for logs, records and the summary)");
  const fs::path out_dir = options.str("out");
  const fs::path runs_dir = options.str("runs").empty() ? out_dir / "runs" : fs::path(options.str("runs"));
  fs::create_directories(out_dir);

  const json settings = {{"train", train_tokens}, {"replay", replay}};
  auto records = read_records(out_dir);
  int64_t next_pair = 1;
  for (const auto& r : records) {
    if (r.at("settings") != settings)
      throw UserError("option out: " + (out_dir / kRecords).string() + " holds fits of other settings (" +
                      r.at("settings").dump() + "); choose another out=");
    next_pair = std::max(next_pair, r.at("pair").get<int64_t>() + 1);
  }
  if (!options.str("first_pair").empty()) {
    const long long first = options.integer("first_pair");
    if (first < 1) throw UserError("option first_pair: must be at least 1");
    for (const auto& r : records)
      if (r.at("pair").get<int64_t>() >= first && r.at("pair").get<int64_t>() < first + pairs)
        throw UserError("option first_pair: pair " + std::to_string(r.at("pair").get<int64_t>()) + " is already in " +
                        (out_dir / kRecords).string());
    next_pair = first;
  }
  // Deterministic cuBLAS in the children, as the fit benchmarks run.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  const std::string exe = fs::read_symlink("/proc/self/exe").string();

  for (int64_t pair = next_pair; pair < next_pair + pairs; ++pair) {
    const bool native_first = pair % 2 == 1;
    const std::vector<std::string> order = native_first ? kArms : std::vector<std::string>{"replay", "native"};
    for (size_t k = 0; k < order.size(); ++k) {
      const auto& arm = order[k];
      const auto name = pair_name(pair, arm);
      const fs::path log = out_dir / (name + ".log");
      const fs::path report_path = runs_dir / name / engine::kFitReportFile;
      ::unlink(report_path.c_str());  // a report left by an earlier call must not stand in for this fit
      std::vector<std::string> child = {"train"};
      child.insert(child.end(), train_tokens.begin(), train_tokens.end());
      child.push_back("project=" + runs_dir.string());
      child.push_back("name=" + name);
      child.push_back("exist_ok=True");
      for (const auto& c : kCaptureOptions) {
        const bool on = arm == "replay" && std::find(replay.begin(), replay.end(), c) != replay.end();
        child.push_back(c + (on ? "=True" : "=False"));
      }
      std::cout << "pair " << pair << " " << arm << " (" << (k == 0 ? "first" : "second") << "): " << std::flush;
      const auto result = run_child(exe, child, log);
      if (result.exit_code != 0)
        throw UserError("pair " + std::to_string(pair) + " " + arm + " fit failed (exit status " +
                        std::to_string(result.exit_code) + "); see " + log.string());
      const auto report = read_report(report_path, log);
      json rec;
      rec["pair"] = pair;
      rec["arm"] = arm;
      rec["ran_first"] = k == 0;
      rec["whole_process_seconds"] = result.seconds;
      for (const char* key : {"fit_seconds", "peak_allocated_mib", "peak_reserved_mib", "epochs", "batches",
                              "optimizer_steps", "sha256", "replay"})
        rec[key] = report.at(key);
      rec["log"] = log.string();
      rec["settings"] = settings;
      append_record(out_dir, rec);
      records.push_back(rec);
      std::cout << "complete fit " << fmt("%.3f", rec["fit_seconds"].get<double>()) << " s, whole process "
                << fmt("%.3f", result.seconds) << " s, peak " << fmt("%.0f", rec["peak_allocated_mib"].get<double>())
                << " / " << fmt("%.0f", rec["peak_reserved_mib"].get<double>()) << " MiB, model "
                << short_hash(rec["sha256"]["model"].get<std::string>()) << ", step losses "
                << short_hash(rec["sha256"]["step_losses"].get<std::string>()) << "\n"
                << std::flush;
    }
    std::vector<std::string> ignored;
    summarise(out_dir, records, ignored);  // kept current, so a call cut short still leaves a summary
  }
  return finish(out_dir, records);
}

int merge_command(const std::vector<std::string>& args) {
  auto options = merge_options();
  options.parse(args);
  const auto from = split_list(options.str("from"));
  if (from.empty()) throw UserError("option from: name the folders to merge (comma list)");
  if (options.str("out").empty()) throw UserError("option out: required (folder for the merged records)");
  const fs::path out_dir = options.str("out");
  if (fs::exists(out_dir / kRecords))
    throw UserError("option out: " + (out_dir / kRecords).string() + " exists; merge into a new folder");
  std::vector<json> records;
  std::set<int64_t> seen;
  bool collide = false;
  std::vector<size_t> part_of;  // position in from= of each record's folder
  for (size_t fi = 0; fi < from.size(); ++fi) {
    const auto& dir = from[fi];
    auto part = read_records(dir);
    if (part.empty()) throw UserError("option from: " + (fs::path(dir) / kRecords).string() + " has no fit records");
    std::set<int64_t> here;
    for (auto& r : part) {
      if (!records.empty() && r.at("settings") != records.front().at("settings"))
        throw UserError("option from: " + dir + " holds fits of other settings than " + from.front());
      here.insert(r.at("pair").get<int64_t>());
      r["source"] = dir;
      records.push_back(r);
      part_of.push_back(fi);
    }
    for (auto p : here) collide |= !seen.insert(p).second;
  }
  if (collide) {
    // Pair numbers repeat across folders (each call started at 1): number them in the order given.
    std::map<std::pair<size_t, int64_t>, int64_t> number;
    for (size_t i = 0; i < records.size(); ++i) {
      auto& r = records[i];
      auto key = std::pair{part_of[i], r.at("pair").get<int64_t>()};
      if (!number.count(key)) number.emplace(key, static_cast<int64_t>(number.size()) + 1);
      r["pair"] = number.at(key);
    }
    std::cout << "pair numbers repeat across the folders: renumbered 1.." << number.size() << " in the order given\n";
  }
  fs::create_directories(out_dir);
  for (const auto& r : records) append_record(out_dir, r);
  return finish(out_dir, records);
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage << "\n" << pairs_options().help() << "\n" << merge_options().help();
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "pairs") {
    if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
      std::cout << kUsage << "\n" << pairs_options().help();
      return 0;
    }
    return pairs_command(rest);
  }
  if (args[0] == "merge") {
    if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
      std::cout << merge_options().help();
      return 0;
    }
    return merge_command(rest);
  }
  if (args[0] == "predict") return predict_bench_command(rest);
  throw UserError("unknown bench '" + args[0] + "' (expected pairs, merge or predict)");
}

}  // namespace lucid::cli
