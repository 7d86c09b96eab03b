// pemc-stan CmdStan-compatible driver.
//
// Implements the CmdStan 2.35 command line (the subset composed by
// cmdstanpy 1.3) and Stan CSV output on top of stan::services.  Linked with
// every model object compiled by the pemc-stan CmdStan-compatible
// installation.  The model translation unit (stanc output) provides
// `new_model` and `get_stan_profile_data`.

#include <stan/callbacks/interrupt.hpp>
#include <stan/callbacks/json_writer.hpp>
#include <stan/callbacks/logger.hpp>
#include <stan/callbacks/structured_writer.hpp>
#include <stan/callbacks/unique_stream_writer.hpp>
#include <stan/callbacks/writer.hpp>
#include <stan/io/array_var_context.hpp>
#include <stan/io/dump.hpp>
#include <stan/io/empty_var_context.hpp>
#include <stan/io/json/json_data.hpp>
#include <stan/io/var_context.hpp>
#include <stan/math/prim/core/init_threadpool_tbb.hpp>
#include <stan/math/rev/core/profiling.hpp>
#include <stan/model/log_prob_grad.hpp>
#include <stan/model/model_base.hpp>
#include <stan/services/diagnose/diagnose.hpp>
#include <stan/services/error_codes.hpp>
#include <stan/services/experimental/advi/fullrank.hpp>
#include <stan/services/experimental/advi/meanfield.hpp>
#include <stan/services/optimize/bfgs.hpp>
#include <stan/services/optimize/laplace_sample.hpp>
#include <stan/services/optimize/lbfgs.hpp>
#include <stan/services/optimize/newton.hpp>
#include <stan/services/pathfinder/multi.hpp>
#include <stan/services/pathfinder/single.hpp>
#include <stan/services/sample/fixed_param.hpp>
#include <stan/services/sample/hmc_nuts_dense_e.hpp>
#include <stan/services/sample/hmc_nuts_dense_e_adapt.hpp>
#include <stan/services/sample/hmc_nuts_diag_e.hpp>
#include <stan/services/sample/hmc_nuts_diag_e_adapt.hpp>
#include <stan/services/sample/hmc_nuts_unit_e.hpp>
#include <stan/services/sample/hmc_nuts_unit_e_adapt.hpp>
#include <stan/services/util/create_rng.hpp>
#include <stan/services/util/create_unit_e_dense_inv_metric.hpp>
#include <stan/services/util/create_unit_e_diag_inv_metric.hpp>
#include <stan/version.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// Provided by the stanc-generated model translation unit.
stan::model::model_base& new_model(stan::io::var_context& data_context,
                                   unsigned int seed, std::ostream* msg_stream);
stan::math::profile_map& get_stan_profile_data();

namespace pemc_driver {

// Return codes (as CmdStan / sysexits).
constexpr int RC_OK = 0;
constexpr int RC_USAGE = 64;
constexpr int RC_DATAERR = 65;
constexpr int RC_SOFTWARE = 70;
constexpr int RC_CONFIG = 78;

struct usage_error : public std::runtime_error {
  explicit usage_error(const std::string& m) : std::runtime_error(m) {}
};

// ---------------------------------------------------------------------------
// Argument tree
// ---------------------------------------------------------------------------

enum class Kind { CATEGORY, LIST, VALUE };
enum class VType { INT, UINT, REAL, BOOL, STRING, INT_OR_STRING };

struct Arg {
  std::string name;
  Kind kind;
  VType vtype = VType::STRING;
  std::string value;     // current value (VALUE / LIST)
  bool is_default = true;
  std::vector<std::unique_ptr<Arg>> children;  // CATEGORY: sub-args;
                                                // LIST: options (categories)

  Arg(std::string n, Kind k) : name(std::move(n)), kind(k) {}

  Arg* add_cat(const std::string& n) {
    children.emplace_back(new Arg(n, Kind::CATEGORY));
    return children.back().get();
  }
  Arg* add_list(const std::string& n, const std::string& def) {
    children.emplace_back(new Arg(n, Kind::LIST));
    children.back()->value = def;
    return children.back().get();
  }
  // add an option to a LIST
  Arg* add_opt(const std::string& n) { return add_cat(n); }
  Arg* add_val(const std::string& n, VType t, const std::string& def) {
    children.emplace_back(new Arg(n, Kind::VALUE));
    children.back()->vtype = t;
    children.back()->value = def;
    return children.back().get();
  }
  Arg* child(const std::string& n) const {
    for (auto& c : children)
      if (c->name == n)
        return c.get();
    return nullptr;
  }
  Arg* selected() const {  // LIST: currently selected option
    return child(value);
  }
};

inline Arg* build_tree() {
  Arg* root = new Arg("", Kind::CATEGORY);
  Arg* method = root->add_list("method", "sample");

  // sample
  Arg* sample = method->add_opt("sample");
  sample->add_val("num_samples", VType::INT, "1000");
  sample->add_val("num_warmup", VType::INT, "1000");
  sample->add_val("save_warmup", VType::BOOL, "false");
  sample->add_val("thin", VType::INT, "1");
  Arg* adapt = sample->add_cat("adapt");
  adapt->add_val("engaged", VType::BOOL, "true");
  adapt->add_val("gamma", VType::REAL, "0.05");
  adapt->add_val("delta", VType::REAL, "0.8");
  adapt->add_val("kappa", VType::REAL, "0.75");
  adapt->add_val("t0", VType::REAL, "10");
  adapt->add_val("init_buffer", VType::UINT, "75");
  adapt->add_val("term_buffer", VType::UINT, "50");
  adapt->add_val("window", VType::UINT, "25");
  adapt->add_val("save_metric", VType::BOOL, "false");
  Arg* salg = sample->add_list("algorithm", "hmc");
  Arg* hmc = salg->add_opt("hmc");
  Arg* engine = hmc->add_list("engine", "nuts");
  Arg* nuts = engine->add_opt("nuts");
  nuts->add_val("max_depth", VType::INT, "10");
  Arg* stat = engine->add_opt("static");
  stat->add_val("int_time", VType::REAL, "6.28319");
  hmc->add_list("metric", "diag_e");
  {
    Arg* m = hmc->child("metric");
    m->add_opt("unit_e");
    m->add_opt("diag_e");
    m->add_opt("dense_e");
  }
  hmc->add_val("metric_file", VType::STRING, "");
  hmc->add_val("stepsize", VType::REAL, "1");
  hmc->add_val("stepsize_jitter", VType::REAL, "0");
  salg->add_opt("fixed_param");
  sample->add_val("num_chains", VType::INT, "1");

  // optimize
  Arg* opt = method->add_opt("optimize");
  Arg* oalg = opt->add_list("algorithm", "lbfgs");
  Arg* bfgs = oalg->add_opt("bfgs");
  bfgs->add_val("init_alpha", VType::REAL, "0.001");
  bfgs->add_val("tol_obj", VType::REAL, "1e-12");
  bfgs->add_val("tol_rel_obj", VType::REAL, "10000");
  bfgs->add_val("tol_grad", VType::REAL, "1e-08");
  bfgs->add_val("tol_rel_grad", VType::REAL, "1e+07");
  bfgs->add_val("tol_param", VType::REAL, "1e-08");
  Arg* lbfgs = oalg->add_opt("lbfgs");
  lbfgs->add_val("init_alpha", VType::REAL, "0.001");
  lbfgs->add_val("tol_obj", VType::REAL, "1e-12");
  lbfgs->add_val("tol_rel_obj", VType::REAL, "10000");
  lbfgs->add_val("tol_grad", VType::REAL, "1e-08");
  lbfgs->add_val("tol_rel_grad", VType::REAL, "1e+07");
  lbfgs->add_val("tol_param", VType::REAL, "1e-08");
  lbfgs->add_val("history_size", VType::INT, "5");
  oalg->add_opt("newton");
  opt->add_val("jacobian", VType::BOOL, "false");
  opt->add_val("iter", VType::INT, "2000");
  opt->add_val("save_iterations", VType::BOOL, "false");

  // variational
  Arg* vb = method->add_opt("variational");
  Arg* valg = vb->add_list("algorithm", "meanfield");
  valg->add_opt("meanfield");
  valg->add_opt("fullrank");
  vb->add_val("iter", VType::INT, "10000");
  vb->add_val("grad_samples", VType::INT, "1");
  vb->add_val("elbo_samples", VType::INT, "100");
  vb->add_val("eta", VType::REAL, "1");
  Arg* vadapt = vb->add_cat("adapt");
  vadapt->add_val("engaged", VType::BOOL, "true");
  vadapt->add_val("iter", VType::INT, "50");
  vb->add_val("tol_rel_obj", VType::REAL, "0.01");
  vb->add_val("eval_elbo", VType::INT, "100");
  vb->add_val("output_samples", VType::INT, "1000");

  // diagnose
  Arg* diag = method->add_opt("diagnose");
  Arg* test = diag->add_list("test", "gradient");
  Arg* grad = test->add_opt("gradient");
  grad->add_val("epsilon", VType::REAL, "1e-06");
  grad->add_val("error", VType::REAL, "1e-06");

  // generate_quantities
  Arg* gq = method->add_opt("generate_quantities");
  gq->add_val("fitted_params", VType::STRING, "");

  // pathfinder
  Arg* pf = method->add_opt("pathfinder");
  pf->add_val("init_alpha", VType::REAL, "0.001");
  pf->add_val("tol_obj", VType::REAL, "1e-12");
  pf->add_val("tol_rel_obj", VType::REAL, "10000");
  pf->add_val("tol_grad", VType::REAL, "1e-08");
  pf->add_val("tol_rel_grad", VType::REAL, "1e+07");
  pf->add_val("tol_param", VType::REAL, "1e-08");
  pf->add_val("history_size", VType::INT, "5");
  pf->add_val("num_psis_draws", VType::INT, "1000");
  pf->add_val("num_paths", VType::INT, "4");
  pf->add_val("save_single_paths", VType::BOOL, "false");
  pf->add_val("psis_resample", VType::BOOL, "true");
  pf->add_val("calculate_lp", VType::BOOL, "true");
  pf->add_val("max_lbfgs_iters", VType::INT, "1000");
  pf->add_val("num_draws", VType::INT, "1000");
  pf->add_val("num_elbo_draws", VType::INT, "25");

  // log_prob
  Arg* lp = method->add_opt("log_prob");
  lp->add_val("unconstrained_params", VType::STRING, "");
  lp->add_val("constrained_params", VType::STRING, "");
  lp->add_val("jacobian", VType::BOOL, "true");

  // laplace
  Arg* lap = method->add_opt("laplace");
  lap->add_val("mode", VType::STRING, "");
  lap->add_val("jacobian", VType::BOOL, "true");
  lap->add_val("draws", VType::INT, "1000");

  root->add_val("id", VType::INT, "1");
  Arg* data = root->add_cat("data");
  data->add_val("file", VType::STRING, "");
  root->add_val("init", VType::STRING, "2");
  Arg* random = root->add_cat("random");
  random->add_val("seed", VType::INT, "-1");
  Arg* output = root->add_cat("output");
  output->add_val("file", VType::STRING, "output.csv");
  output->add_val("diagnostic_file", VType::STRING, "");
  output->add_val("refresh", VType::INT, "100");
  output->add_val("sig_figs", VType::INT, "-1");
  output->add_val("profile_file", VType::STRING, "profile.csv");
  output->add_val("save_cmdstan_config", VType::BOOL, "false");
  root->add_val("num_threads", VType::INT, "1");
  return root;
}

inline bool parse_bool(const std::string& s, bool& out) {
  if (s == "1" || s == "true" || s == "TRUE" || s == "True") {
    out = true;
    return true;
  }
  if (s == "0" || s == "false" || s == "FALSE" || s == "False") {
    out = false;
    return true;
  }
  return false;
}

inline bool parse_long(const std::string& s, long long& out) {
  if (s.empty())
    return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

inline bool parse_double(const std::string& s, double& out) {
  if (s.empty())
    return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

inline void set_value(Arg* a, const std::string& v) {
  std::string val = v;
  switch (a->vtype) {
    case VType::INT:
    case VType::UINT: {
      long long x;
      if (!parse_long(v, x)) {
        // allow e.g. "1000.0"?  CmdStan does not.
        throw usage_error(v + " is not a valid value for \"" + a->name
                          + "\" (expected an integer)");
      }
      if (a->vtype == VType::UINT && x < 0)
        throw usage_error(v + " is not a valid value for \"" + a->name
                          + "\" (expected a non-negative integer)");
      val = std::to_string(x);
      break;
    }
    case VType::REAL: {
      double x;
      if (!parse_double(v, x))
        throw usage_error(v + " is not a valid value for \"" + a->name
                          + "\" (expected a real number)");
      break;
    }
    case VType::BOOL: {
      bool b;
      if (!parse_bool(v, b))
        throw usage_error(v + " is not a valid value for \"" + a->name
                          + "\" (expected 0, 1, true or false)");
      val = b ? "true" : "false";
      break;
    }
    default:
      break;
  }
  a->value = val;
  a->is_default = false;
}

// Parse argv into the tree, following CmdStan's scoping rules: an argument
// is looked up in the current category, then in each enclosing category.
inline void parse_args(Arg* root, const std::vector<std::string>& args) {
  std::vector<Arg*> stack{root};
  for (const auto& tok : args) {
    std::string key = tok, val;
    bool has_eq = false;
    auto eq = tok.find('=');
    if (eq != std::string::npos) {
      key = tok.substr(0, eq);
      val = tok.substr(eq + 1);
      has_eq = true;
    }
    bool found = false;
    for (int lvl = static_cast<int>(stack.size()) - 1; lvl >= 0 && !found;
         --lvl) {
      Arg* ctx = stack[lvl];
      for (auto& c : ctx->children) {
        Arg* a = c.get();
        if (a->name == key) {
          if (a->kind == Kind::CATEGORY) {
            if (has_eq)
              throw usage_error("\"" + key + "\" does not take a value");
            stack.resize(lvl + 1);
            stack.push_back(a);
          } else if (a->kind == Kind::LIST) {
            if (!has_eq)
              throw usage_error("\"" + key + "\" requires a value");
            if (!a->child(val))
              throw usage_error(val + " is not a valid value for \"" + key
                                + "\"");
            a->value = val;
            a->is_default = false;
            stack.resize(lvl + 1);
            stack.push_back(a->selected());
          } else {
            if (!has_eq)
              throw usage_error("\"" + key + "\" requires a value (" + key
                                + "=...)");
            set_value(a, val);
            stack.resize(lvl + 1);
          }
          found = true;
          break;
        }
        // bare word naming an option of a list (e.g. "sample")
        if (!has_eq && a->kind == Kind::LIST && a->child(key)) {
          a->value = key;
          a->is_default = false;
          stack.resize(lvl + 1);
          stack.push_back(a->selected());
          found = true;
          break;
        }
      }
    }
    if (!found)
      throw usage_error(tok + " is either mistyped or misplaced.");
  }
}

inline void print_tree(std::ostream& o, const Arg* node, int depth,
                       const std::string& prefix) {
  for (auto& c : node->children) {
    std::string ind(2 * depth, ' ');
    if (c->kind == Kind::CATEGORY) {
      o << prefix << ind << c->name << "\n";
      print_tree(o, c.get(), depth + 1, prefix);
    } else if (c->kind == Kind::LIST) {
      o << prefix << ind << c->name << " = " << c->value
        << (c->is_default ? " (Default)" : "") << "\n";
      const Arg* sel = c->selected();
      o << prefix << ind << "  " << sel->name << "\n";
      print_tree(o, sel, depth + 2, prefix);
    } else {
      o << prefix << ind << c->name << " = " << c->value
        << (c->is_default ? " (Default)" : "") << "\n";
    }
  }
}

// Accessors: path like "method/sample/adapt/engaged"; LIST nodes are
// traversed through their selected option automatically.
inline Arg* find(Arg* root, const std::vector<std::string>& path) {
  Arg* cur = root;
  for (const auto& p : path) {
    Arg* nxt = cur->child(p);
    if (!nxt)
      throw std::logic_error("internal: no argument " + p);
    cur = nxt;
  }
  return cur;
}

struct Config {
  std::unique_ptr<Arg> root;
  Arg* get(const std::vector<std::string>& path) const {
    return find(root.get(), path);
  }
  std::string str(const std::vector<std::string>& p) const {
    return get(p)->value;
  }
  long long i(const std::vector<std::string>& p) const {
    long long x = 0;
    parse_long(get(p)->value, x);
    return x;
  }
  double d(const std::vector<std::string>& p) const {
    double x = 0;
    parse_double(get(p)->value, x);
    return x;
  }
  bool b(const std::vector<std::string>& p) const {
    bool x = false;
    parse_bool(get(p)->value, x);
    return x;
  }
};

// ---------------------------------------------------------------------------
// Logger: thread safe, line buffered, info/warn to stdout, errors to stderr
// ---------------------------------------------------------------------------

class Logger : public stan::callbacks::logger {
 public:
  void debug(const std::string& m) override { out(std::cout, m); }
  void debug(const std::stringstream& m) override { out(std::cout, m.str()); }
  void info(const std::string& m) override { out(std::cout, m); }
  void info(const std::stringstream& m) override { out(std::cout, m.str()); }
  void warn(const std::string& m) override { out(std::cout, m); }
  void warn(const std::stringstream& m) override { out(std::cout, m.str()); }
  void error(const std::string& m) override { out(std::cerr, m); }
  void error(const std::stringstream& m) override { out(std::cerr, m.str()); }
  void fatal(const std::string& m) override { out(std::cerr, m); }
  void fatal(const std::stringstream& m) override { out(std::cerr, m.str()); }

 private:
  std::mutex mtx_;
  void out(std::ostream& o, const std::string& m) {
    std::lock_guard<std::mutex> lock(mtx_);
    o << m << std::endl;
  }
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

inline bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

inline bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size()
         && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

inline std::shared_ptr<stan::io::var_context> load_var_context(
    const std::string& path) {
  if (path.empty())
    return std::make_shared<stan::io::empty_var_context>();
  std::ifstream in(path);
  if (!in.good())
    throw std::invalid_argument("Can't open specified file, \"" + path
                                + "\"");
  if (ends_with(path, ".json") || ends_with(path, ".JSON")) {
    return std::make_shared<stan::json::json_data>(in);
  }
  return std::make_shared<stan::io::dump>(in);
}

// For multi-chain runs: "x.json" -> "x_<id>.json" if that exists.
inline std::string per_chain_file(const std::string& path, int id,
                                  bool multi) {
  if (!multi || path.empty())
    return path;
  auto dot = path.rfind('.');
  auto slash = path.find_last_of("/\\");
  std::string cand;
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    cand = path + "_" + std::to_string(id);
  else
    cand = path.substr(0, dot) + "_" + std::to_string(id) + path.substr(dot);
  if (file_exists(cand))
    return cand;
  return path;
}

// Output file name for chain `id` (CmdStan: "out.csv" -> "out_<id>.csv").
inline std::string chain_file(const std::string& path, int id, bool multi,
                              const std::string& extra = "") {
  if (path.empty())
    return path;
  if (!multi && extra.empty())
    return path;
  auto dot = path.rfind('.');
  auto slash = path.find_last_of("/\\");
  std::string base, ext;
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    base = path;
    ext = "";
  } else {
    base = path.substr(0, dot);
    ext = path.substr(dot);
  }
  if (multi)
    return base + extra + "_" + std::to_string(id) + ext;
  return base + extra + ext;
}

inline std::unique_ptr<std::ofstream> open_out(const std::string& path,
                                               int sig_figs) {
  if (path.empty())
    return std::unique_ptr<std::ofstream>(nullptr);
  std::unique_ptr<std::ofstream> o(new std::ofstream(path));
  if (!o->good())
    throw std::invalid_argument("Cannot open output file \"" + path + "\"");
  if (sig_figs > -1)
    *o << std::setprecision(sig_figs);
  return o;
}

using Writer = stan::callbacks::unique_stream_writer<std::ofstream>;

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

struct RunInfo {
  std::string model_name;
  std::vector<std::string> compile_info;
  std::string start;
};

inline void write_config(std::ostream& o, Config& cfg, const RunInfo& ri,
                         const std::string& prefix, int chain_id) {
  o << prefix << "stan_version_major = " << STAN_MAJOR << "\n";
  o << prefix << "stan_version_minor = " << STAN_MINOR << "\n";
  o << prefix << "stan_version_patch = " << STAN_PATCH << "\n";
  o << prefix << "model = " << ri.model_name << "\n";
  o << prefix << "start_datetime = " << ri.start << "\n";
  Arg* id = cfg.get({"id"});
  std::string saved = id->value;
  bool saved_def = id->is_default;
  if (chain_id >= 0 && std::to_string(chain_id) != id->value) {
    id->value = std::to_string(chain_id);
    id->is_default = false;
  }
  print_tree(o, cfg.root.get(), 0, prefix);
  id->value = saved;
  id->is_default = saved_def;
  for (const auto& s : ri.compile_info)
    o << prefix << s << "\n";
  o.flush();
}

inline void write_config(Writer& w, Config& cfg, const RunInfo& ri,
                         int chain_id) {
  std::stringstream ss;
  write_config(ss, cfg, ri, "", chain_id);
  std::string line;
  while (std::getline(ss, line))
    w(line);
}

// Simple Stan CSV reader: comment lines, header, numeric rows.
struct StanCsv {
  std::vector<std::string> comments;
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
};

inline std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    auto b = tok.find_first_not_of(" \t\r");
    auto e = tok.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : tok.substr(b, e - b + 1));
  }
  return out;
}

inline StanCsv read_stan_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in.good())
    throw std::invalid_argument("Can't open specified file, \"" + path
                                + "\"");
  StanCsv csv;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      continue;
    if (line[0] == '#') {
      csv.comments.push_back(line);
      continue;
    }
    if (csv.header.empty()) {
      csv.header = split_csv(line);
      continue;
    }
    auto toks = split_csv(line);
    if (toks.size() != csv.header.size())
      throw std::invalid_argument("Error reading \"" + path
                                  + "\": row has wrong number of columns");
    std::vector<double> row(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      if (!parse_double(toks[i], row[i])) {
        if (toks[i] == "inf" || toks[i] == "Inf")
          row[i] = INFINITY;
        else if (toks[i] == "-inf" || toks[i] == "-Inf")
          row[i] = -INFINITY;
        else
          row[i] = NAN;
      }
    }
    csv.rows.push_back(std::move(row));
  }
  if (csv.header.empty())
    throw std::invalid_argument("Error reading \"" + path
                                + "\": no header line found");
  return csv;
}

// Extract the model's constrained parameters from a Stan CSV.
inline Eigen::MatrixXd csv_param_draws(const stan::model::model_base& model,
                                       const StanCsv& csv,
                                       const std::string& path,
                                       size_t skip_rows = 0) {
  std::vector<std::string> names;
  model.constrained_param_names(names, false, false);
  std::vector<size_t> idx;
  for (const auto& n : names) {
    auto it = std::find(csv.header.begin(), csv.header.end(), n);
    if (it == csv.header.end())
      throw std::invalid_argument(
          "Mismatch between model and fitted_parameters csv file \"" + path
          + "\": parameter " + n + " not found");
    idx.push_back(it - csv.header.begin());
  }
  size_t nrows = csv.rows.size() > skip_rows ? csv.rows.size() - skip_rows : 0;
  Eigen::MatrixXd m(nrows, names.size());
  for (size_t r = 0; r < nrows; ++r)
    for (size_t c = 0; c < idx.size(); ++c)
      m(r, c) = csv.rows[r + skip_rows][idx[c]];
  return m;
}

inline bool csv_has_comment(const StanCsv& csv, const std::string& s) {
  for (const auto& c : csv.comments)
    if (c.find(s) != std::string::npos)
      return true;
  return false;
}

inline void write_profile(const std::string& path) {
  auto& prof = get_stan_profile_data();
  if (prof.size() == 0 || path.empty())
    return;
  std::ofstream o(path);
  o << "name,thread_id,total_time,forward_time,reverse_time,chain_stack,"
       "no_chain_stack,autodiff_calls,no_autodiff_calls\n";
  for (auto& kv : prof) {
    const auto& info = kv.second;
    std::stringstream tid;
    tid << kv.first.second;
    o << kv.first.first << "," << tid.str() << ","
      << info.get_fwd_time() + info.get_rev_time() << ","
      << info.get_fwd_time() << "," << info.get_rev_time() << ","
      << info.get_chain_stack_used() << "," << info.get_nochain_stack_used()
      << "," << info.get_num_AD_fwd_passes() << ","
      << info.get_num_no_AD_fwd_passes() << "\n";
  }
}

// ---------------------------------------------------------------------------
// Methods
// ---------------------------------------------------------------------------

struct Ctx {
  Config cfg;
  RunInfo ri;
  Logger logger;
  stan::callbacks::interrupt interrupt;
  unsigned int seed = 0;
  int id = 1;
  double init_radius = 2;
  std::string init_file;
  int sig_figs = -1;
  int refresh = 100;
  std::string out_file, diag_file;
};

inline std::shared_ptr<stan::io::var_context> init_context(Ctx& c, int id,
                                                           bool multi) {
  if (c.init_file.empty())
    return std::make_shared<stan::io::empty_var_context>();
  return load_var_context(per_chain_file(c.init_file, id, multi));
}

int run_sample(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  const std::vector<std::string> S{"method", "sample"};
  auto P = [&](std::vector<std::string> rest) {
    std::vector<std::string> p = S;
    p.insert(p.end(), rest.begin(), rest.end());
    return p;
  };
  int num_samples = cfg.i(P({"num_samples"}));
  int num_warmup = cfg.i(P({"num_warmup"}));
  bool save_warmup = cfg.b(P({"save_warmup"}));
  int thin = cfg.i(P({"thin"}));
  int num_chains = cfg.i(P({"num_chains"}));
  if (num_samples < 0)
    throw usage_error("num_samples must be >= 0");
  if (num_warmup < 0)
    throw usage_error("num_warmup must be >= 0");
  if (thin < 1)
    throw usage_error("thin must be > 0");
  if (num_chains < 1)
    throw usage_error("num_chains must be >= 1");
  bool adapt_engaged = cfg.b(P({"adapt", "engaged"}));
  double gamma = cfg.d(P({"adapt", "gamma"}));
  double delta = cfg.d(P({"adapt", "delta"}));
  double kappa = cfg.d(P({"adapt", "kappa"}));
  double t0 = cfg.d(P({"adapt", "t0"}));
  unsigned int init_buffer = cfg.i(P({"adapt", "init_buffer"}));
  unsigned int term_buffer = cfg.i(P({"adapt", "term_buffer"}));
  unsigned int window = cfg.i(P({"adapt", "window"}));
  if (!(delta > 0 && delta < 1))
    throw usage_error("delta must be in (0, 1)");
  Arg* alg = cfg.get(P({"algorithm"}));
  bool fixed = alg->value == "fixed_param";
  if (model.num_params_r() == 0 && !fixed) {
    c.logger.info(
        "Model contains no parameters, running fixed_param sampler, no "
        "updates to Markov chain");
    alg->value = "fixed_param";
    fixed = true;
  }
  std::string metric = "diag_e", metric_file;
  double stepsize = 1, jitter = 0;
  int max_depth = 10;
  if (!fixed) {
    Arg* hmc = alg->selected();
    if (hmc->child("engine")->value != "nuts")
      throw usage_error("engine=static is not supported by this driver");
    max_depth = cfg.i(P({"algorithm", "hmc", "engine", "nuts", "max_depth"}));
    metric = hmc->child("metric")->value;
    metric_file = hmc->child("metric_file")->value;
    stepsize = cfg.d(P({"algorithm", "hmc", "stepsize"}));
    jitter = cfg.d(P({"algorithm", "hmc", "stepsize_jitter"}));
    if (!(stepsize > 0))
      throw usage_error("stepsize must be > 0");
    if (max_depth < 1)
      throw usage_error("max_depth must be > 0");
  }
  bool multi = num_chains > 1;
  if (cfg.b(P({"adapt", "save_metric"})))
    c.logger.warn(
        "save_metric is not supported by this driver; the adapted metric is "
        "reported in the output CSV only.");

  std::vector<std::shared_ptr<stan::io::var_context>> inits;
  std::vector<std::shared_ptr<stan::io::var_context>> metrics;
  std::vector<stan::callbacks::writer> init_writers(num_chains);
  std::vector<Writer> sample_writers;
  std::vector<Writer> diag_writers;
  std::vector<stan::callbacks::structured_writer> metric_writers(num_chains);
  sample_writers.reserve(num_chains);
  diag_writers.reserve(num_chains);
  for (int k = 0; k < num_chains; ++k) {
    int cid = c.id + k;
    inits.push_back(init_context(c, cid, multi));
    if (!fixed && metric != "unit_e") {
      if (!metric_file.empty()) {
        metrics.push_back(
            load_var_context(per_chain_file(metric_file, cid, multi)));
      } else if (metric == "diag_e") {
        metrics.push_back(std::make_shared<stan::io::array_var_context>(
            stan::services::util::create_unit_e_diag_inv_metric(
                model.num_params_r())));
      } else {
        metrics.push_back(std::make_shared<stan::io::array_var_context>(
            stan::services::util::create_unit_e_dense_inv_metric(
                model.num_params_r())));
      }
    }
    sample_writers.emplace_back(
        open_out(chain_file(c.out_file, cid, multi), c.sig_figs), "# ");
    write_config(sample_writers.back(), cfg, c.ri, cid);
    diag_writers.emplace_back(
        open_out(chain_file(c.diag_file, cid, multi), c.sig_figs), "# ");
    write_config(diag_writers.back(), cfg, c.ri, cid);
  }

  size_t n = num_chains;
  if (fixed) {
    return stan::services::sample::fixed_param(
        model, n, inits, c.seed, c.id, c.init_radius, num_samples, thin,
        c.refresh, c.interrupt, c.logger, init_writers, sample_writers,
        diag_writers);
  }
  bool adapt = adapt_engaged && num_warmup > 0;
  if (adapt_engaged && num_warmup == 0)
    c.logger.info("num_warmup = 0, adaptation disabled.");
  if (metric == "diag_e") {
    if (adapt)
      return stan::services::sample::hmc_nuts_diag_e_adapt(
          model, n, inits, metrics, c.seed, c.id, c.init_radius, num_warmup,
          num_samples, thin, save_warmup, c.refresh, stepsize, jitter,
          max_depth, delta, gamma, kappa, t0, init_buffer, term_buffer, window,
          c.interrupt, c.logger, init_writers, sample_writers, diag_writers,
          metric_writers);
    return stan::services::sample::hmc_nuts_diag_e(
        model, n, inits, metrics, c.seed, c.id, c.init_radius, num_warmup,
        num_samples, thin, save_warmup, c.refresh, stepsize, jitter, max_depth,
        c.interrupt, c.logger, init_writers, sample_writers, diag_writers);
  }
  if (metric == "dense_e") {
    if (adapt)
      return stan::services::sample::hmc_nuts_dense_e_adapt(
          model, n, inits, metrics, c.seed, c.id, c.init_radius, num_warmup,
          num_samples, thin, save_warmup, c.refresh, stepsize, jitter,
          max_depth, delta, gamma, kappa, t0, init_buffer, term_buffer, window,
          c.interrupt, c.logger, init_writers, sample_writers, diag_writers,
          metric_writers);
    return stan::services::sample::hmc_nuts_dense_e(
        model, n, inits, metrics, c.seed, c.id, c.init_radius, num_warmup,
        num_samples, thin, save_warmup, c.refresh, stepsize, jitter, max_depth,
        c.interrupt, c.logger, init_writers, sample_writers, diag_writers);
  }
  // unit_e
  if (adapt)
    return stan::services::sample::hmc_nuts_unit_e_adapt(
        model, n, inits, c.seed, c.id, c.init_radius, num_warmup, num_samples,
        thin, save_warmup, c.refresh, stepsize, jitter, max_depth, delta,
        gamma, kappa, t0, c.interrupt, c.logger, init_writers, sample_writers,
        diag_writers, metric_writers);
  return stan::services::sample::hmc_nuts_unit_e(
      model, n, inits, c.seed, c.id, c.init_radius, num_warmup, num_samples,
      thin, save_warmup, c.refresh, stepsize, jitter, max_depth, c.interrupt,
      c.logger, init_writers, sample_writers, diag_writers);
}

int run_optimize(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  Arg* alg = cfg.get({"method", "optimize", "algorithm"});
  bool jacobian = cfg.b({"method", "optimize", "jacobian"});
  int iter = cfg.i({"method", "optimize", "iter"});
  bool save_iter = cfg.b({"method", "optimize", "save_iterations"});
  auto init = init_context(c, c.id, false);
  stan::callbacks::writer init_writer;
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, cfg, c.ri, -1);
  if (model.num_params_r() == 0) {
    c.logger.error("Model contains no parameters; nothing to optimize.");
    return RC_CONFIG;
  }
  const std::string a = alg->value;
  std::vector<std::string> base{"method", "optimize", "algorithm", a};
  auto D = [&](const char* n) {
    auto p = base;
    p.push_back(n);
    return cfg.d(p);
  };
  if (a == "newton") {
    if (jacobian)
      return stan::services::optimize::newton<stan::model::model_base, true>(
          model, *init, c.seed, c.id, c.init_radius, iter, save_iter,
          c.interrupt, c.logger, init_writer, out);
    return stan::services::optimize::newton<stan::model::model_base, false>(
        model, *init, c.seed, c.id, c.init_radius, iter, save_iter,
        c.interrupt, c.logger, init_writer, out);
  }
  if (a == "bfgs") {
    if (jacobian)
      return stan::services::optimize::bfgs<stan::model::model_base, true>(
          model, *init, c.seed, c.id, c.init_radius, D("init_alpha"),
          D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
          D("tol_param"), iter, save_iter, c.refresh, c.interrupt, c.logger,
          init_writer, out);
    return stan::services::optimize::bfgs<stan::model::model_base, false>(
        model, *init, c.seed, c.id, c.init_radius, D("init_alpha"),
        D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
        D("tol_param"), iter, save_iter, c.refresh, c.interrupt, c.logger,
        init_writer, out);
  }
  int hist = static_cast<int>(D("history_size"));
  if (jacobian)
    return stan::services::optimize::lbfgs<stan::model::model_base, true>(
        model, *init, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
        D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
        D("tol_param"), iter, save_iter, c.refresh, c.interrupt, c.logger,
        init_writer, out);
  return stan::services::optimize::lbfgs<stan::model::model_base, false>(
      model, *init, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
      D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
      D("tol_param"), iter, save_iter, c.refresh, c.interrupt, c.logger,
      init_writer, out);
}

int run_variational(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  const std::vector<std::string> V{"method", "variational"};
  auto P = [&](std::vector<std::string> rest) {
    auto p = V;
    p.insert(p.end(), rest.begin(), rest.end());
    return p;
  };
  std::string alg = cfg.str(P({"algorithm"}));
  int iter = cfg.i(P({"iter"}));
  int grad_samples = cfg.i(P({"grad_samples"}));
  int elbo_samples = cfg.i(P({"elbo_samples"}));
  double eta = cfg.d(P({"eta"}));
  bool adapt = cfg.b(P({"adapt", "engaged"}));
  int adapt_iter = cfg.i(P({"adapt", "iter"}));
  double tol_rel_obj = cfg.d(P({"tol_rel_obj"}));
  int eval_elbo = cfg.i(P({"eval_elbo"}));
  int output_samples = cfg.i(P({"output_samples"}));
  auto init = init_context(c, c.id, false);
  stan::callbacks::writer init_writer;
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, cfg, c.ri, -1);
  Writer diag(open_out(c.diag_file, c.sig_figs), "# ");
  write_config(diag, cfg, c.ri, -1);
  if (model.num_params_r() == 0) {
    c.logger.error("Model contains no parameters.");
    return RC_CONFIG;
  }
  if (alg == "fullrank")
    return stan::services::experimental::advi::fullrank(
        model, *init, c.seed, c.id, c.init_radius, grad_samples, elbo_samples,
        iter, tol_rel_obj, eta, adapt, adapt_iter, eval_elbo, output_samples,
        c.interrupt, c.logger, init_writer, out, diag);
  return stan::services::experimental::advi::meanfield(
      model, *init, c.seed, c.id, c.init_radius, grad_samples, elbo_samples,
      iter, tol_rel_obj, eta, adapt, adapt_iter, eval_elbo, output_samples,
      c.interrupt, c.logger, init_writer, out, diag);
}

int run_pathfinder(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  const std::vector<std::string> PF{"method", "pathfinder"};
  auto D = [&](const char* n) {
    auto p = PF;
    p.push_back(n);
    return cfg.d(p);
  };
  auto I = [&](const char* n) {
    auto p = PF;
    p.push_back(n);
    return static_cast<int>(cfg.i(p));
  };
  auto B = [&](const char* n) {
    auto p = PF;
    p.push_back(n);
    return cfg.b(p);
  };
  int num_paths = I("num_paths");
  int num_psis = I("num_psis_draws");
  int num_draws = I("num_draws");
  int num_elbo = I("num_elbo_draws");
  int hist = I("history_size");
  int max_iters = I("max_lbfgs_iters");
  bool save_single = B("save_single_paths");
  bool psis_resample = B("psis_resample");
  bool calculate_lp = B("calculate_lp");
  if (num_paths < 1)
    throw usage_error("num_paths must be >= 1");
  if (num_draws < 1 || num_psis < 1 || num_elbo < 1 || hist < 1
      || max_iters < 1)
    throw usage_error("pathfinder draws/iteration arguments must be >= 1");
  if (model.num_params_r() == 0) {
    c.logger.error("Model contains no parameters.");
    return RC_CONFIG;
  }
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, cfg, c.ri, -1);
  if (num_paths == 1) {
    auto init = init_context(c, c.id, false);
    stan::callbacks::writer init_writer;
    std::string json_path;
    {
      auto dot = c.out_file.rfind('.');
      json_path = (dot == std::string::npos ? c.out_file
                                            : c.out_file.substr(0, dot))
                  + ".json";
    }
    if (save_single) {
      stan::callbacks::json_writer<std::ofstream> diag(
          std::unique_ptr<std::ofstream>(new std::ofstream(json_path)));
      return stan::services::pathfinder::pathfinder_lbfgs_single<false>(
          model, *init, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
          D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
          D("tol_param"), max_iters, num_elbo, num_draws, true, c.refresh,
          c.interrupt, c.logger, init_writer, out, diag, calculate_lp);
    }
    stan::callbacks::structured_writer diag;
    return stan::services::pathfinder::pathfinder_lbfgs_single<false>(
        model, *init, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
        D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
        D("tol_param"), max_iters, num_elbo, num_draws, false, c.refresh,
        c.interrupt, c.logger, init_writer, out, diag, calculate_lp);
  }
  std::vector<std::shared_ptr<stan::io::var_context>> inits;
  std::vector<stan::callbacks::writer> init_writers(num_paths);
  for (int k = 0; k < num_paths; ++k)
    inits.push_back(init_context(c, c.id + k, true));
  stan::callbacks::structured_writer diag;
  if (save_single) {
    std::vector<Writer> single_out;
    std::vector<stan::callbacks::json_writer<std::ofstream>> single_diag;
    single_out.reserve(num_paths);
    single_diag.reserve(num_paths);
    for (int k = 0; k < num_paths; ++k) {
      std::string p = chain_file(c.out_file, c.id + k, true, "_path");
      single_out.emplace_back(open_out(p, c.sig_figs), "# ");
      write_config(single_out.back(), cfg, c.ri, c.id + k);
      auto dot = p.rfind('.');
      std::string jp
          = (dot == std::string::npos ? p : p.substr(0, dot)) + ".json";
      single_diag.emplace_back(
          std::unique_ptr<std::ofstream>(new std::ofstream(jp)));
    }
    return stan::services::pathfinder::pathfinder_lbfgs_multi(
        model, inits, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
        D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
        D("tol_param"), max_iters, num_elbo, num_draws, num_psis, num_paths,
        true, c.refresh, c.interrupt, c.logger, init_writers, single_out,
        single_diag, out, diag, calculate_lp, psis_resample);
  }
  std::vector<stan::callbacks::writer> single_out(num_paths);
  std::vector<stan::callbacks::structured_writer> single_diag(num_paths);
  return stan::services::pathfinder::pathfinder_lbfgs_multi(
      model, inits, c.seed, c.id, c.init_radius, hist, D("init_alpha"),
      D("tol_obj"), D("tol_rel_obj"), D("tol_grad"), D("tol_rel_grad"),
      D("tol_param"), max_iters, num_elbo, num_draws, num_psis, num_paths,
      false, c.refresh, c.interrupt, c.logger, init_writers, single_out,
      single_diag, out, diag, calculate_lp, psis_resample);
}

// Unconstrained parameter vector from a JSON/Rdump file or a Stan CSV (last
// row) of constrained values.
inline std::vector<Eigen::VectorXd> read_constrained_points(
    const stan::model::model_base& model, const std::string& path,
    bool all_rows) {
  std::vector<Eigen::VectorXd> out;
  if (ends_with(path, ".csv")) {
    StanCsv csv = read_stan_csv(path);
    Eigen::MatrixXd m = csv_param_draws(model, csv, path);
    if (m.rows() == 0)
      throw std::invalid_argument("No draws found in \"" + path + "\"");
    size_t start = all_rows ? 0 : m.rows() - 1;
    for (Eigen::Index r = start; r < m.rows(); ++r) {
      Eigen::VectorXd cons = m.row(r).transpose();
      Eigen::VectorXd unc;
      std::stringstream msg;
      model.unconstrain_array(cons, unc, &msg);
      out.push_back(unc);
    }
    return out;
  }
  auto ctx = load_var_context(path);
  Eigen::VectorXd unc;
  std::stringstream msg;
  model.transform_inits(*ctx, unc, &msg);
  out.push_back(unc);
  return out;
}

int run_laplace(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  std::string mode = cfg.str({"method", "laplace", "mode"});
  bool jacobian = cfg.b({"method", "laplace", "jacobian"});
  int draws = cfg.i({"method", "laplace", "draws"});
  if (mode.empty())
    throw usage_error("laplace requires argument mode=<file>");
  if (draws < 0)
    throw usage_error("draws must be >= 0");
  if (ends_with(mode, ".csv")) {
    StanCsv csv = read_stan_csv(mode);
    // CmdStan checks that the mode was computed with the same jacobian.
    bool mode_jac = csv_has_comment(csv, "jacobian = true")
                    || csv_has_comment(csv, "jacobian = 1");
    if (!csv_has_comment(csv, "method = optimize"))
      c.logger.warn("Mode file \"" + mode
                    + "\" does not look like optimize output.");
    else if (mode_jac != jacobian)
      c.logger.warn(
          "Jacobian argument of the mode file does not match the Laplace "
          "jacobian argument.");
  }
  Eigen::VectorXd theta_hat = read_constrained_points(model, mode, false)[0];
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, cfg, c.ri, -1);
  if (jacobian)
    return stan::services::laplace_sample<true>(model, theta_hat, draws,
                                                c.seed, c.refresh, c.interrupt,
                                                c.logger, out);
  return stan::services::laplace_sample<false>(model, theta_hat, draws, c.seed,
                                               c.refresh, c.interrupt,
                                               c.logger, out);
}

int run_generate_quantities(Ctx& c, stan::model::model_base& model) {
  std::string fitted = c.cfg.str({"method", "generate_quantities",
                                  "fitted_params"});
  if (fitted.empty())
    throw usage_error(
        "generate_quantities requires argument fitted_params=<csv file>");
  StanCsv csv = read_stan_csv(fitted);
  // Every row is used (including warmup draws, saved optimizer iterations
  // and the mean row of a variational fit), as CmdStan does.
  Eigen::MatrixXd draws = csv_param_draws(model, csv, fitted);
  std::vector<std::string> p_names;
  model.constrained_param_names(p_names, false, false);
  std::vector<std::string> gq_names;
  model.constrained_param_names(gq_names, false, true);
  if (!(p_names.size() < gq_names.size())) {
    c.logger.error("Model doesn't generate any quantities of interest.");
    return RC_CONFIG;
  }
  if (draws.rows() == 0) {
    c.logger.error("Empty set of draws from fitted model.");
    return RC_DATAERR;
  }
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, c.cfg, c.ri, -1);
  // CmdStan 2.35 writes only the generated quantities (cmdstanpy joins
  // them with the draws of the previous fit).
  const size_t num_p = p_names.size();
  std::vector<std::string> out_names(gq_names.begin() + num_p, gq_names.end());
  out(out_names);
  stan::rng_t rng = stan::services::util::create_rng(c.seed, c.id);
  std::vector<int> params_i;
  for (Eigen::Index r = 0; r < draws.rows(); ++r) {
    std::vector<double> cons(draws.cols());
    for (Eigen::Index j = 0; j < draws.cols(); ++j)
      cons[j] = draws(r, j);
    std::vector<double> unc;
    std::stringstream msg;
    try {
      model.unconstrain_array(cons, unc, &msg);
    } catch (const std::exception& e) {
      if (msg.str().length() > 0)
        c.logger.error(msg);
      c.logger.error(e.what());
      return RC_DATAERR;
    }
    std::vector<double> values;
    std::stringstream ss;
    try {
      model.write_array(rng, unc, params_i, values, false, true, &ss);
    } catch (const std::exception& e) {
      if (ss.str().length() > 0)
        c.logger.info(ss);
      c.logger.info(e.what());
      values.assign(gq_names.size(),
                    std::numeric_limits<double>::quiet_NaN());
    }
    if (ss.str().length() > 0)
      c.logger.info(ss);
    if (values.size() != gq_names.size())
      values.resize(gq_names.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<double> gq_values(values.begin() + num_p, values.end());
    out(gq_values);
    c.interrupt();
  }
  return RC_OK;
}

int run_log_prob(Ctx& c, stan::model::model_base& model) {
  Config& cfg = c.cfg;
  std::string ufile = cfg.str({"method", "log_prob", "unconstrained_params"});
  std::string cfile = cfg.str({"method", "log_prob", "constrained_params"});
  bool jacobian = cfg.b({"method", "log_prob", "jacobian"});
  if (ufile.empty() == cfile.empty())
    throw usage_error(
        "log_prob requires exactly one of unconstrained_params or "
        "constrained_params");
  std::vector<Eigen::VectorXd> points;
  size_t n = model.num_params_r();
  if (!cfile.empty()) {
    points = read_constrained_points(model, cfile, true);
  } else {
    auto ctx = load_var_context(ufile);
    if (!ctx->contains_r("params_r"))
      throw std::invalid_argument("Unconstrained parameter file \"" + ufile
                                  + "\" has no variable params_r");
    std::vector<double> v = ctx->vals_r("params_r");
    std::vector<size_t> dims = ctx->dims_r("params_r");
    if (dims.size() <= 1) {
      if (v.size() != n)
        throw std::invalid_argument(
            "params_r has wrong size: expected " + std::to_string(n)
            + ", found " + std::to_string(v.size()));
      points.push_back(Eigen::Map<Eigen::VectorXd>(v.data(), v.size()));
    } else {
      size_t rows = dims[0], cols = dims[1];
      if (cols != n)
        throw std::invalid_argument(
            "params_r has wrong size: expected " + std::to_string(n)
            + " columns, found " + std::to_string(cols));
      // var_context stores arrays column-major
      for (size_t r = 0; r < rows; ++r) {
        Eigen::VectorXd p(n);
        for (size_t j = 0; j < n; ++j)
          p(j) = v[r + j * rows];
        points.push_back(p);
      }
    }
  }
  std::unique_ptr<std::ofstream> o = open_out(c.out_file, c.sig_figs);
  if (c.sig_figs < 0)
    *o << std::setprecision(9);
  write_config(*o, cfg, c.ri, "# ", -1);
  std::vector<std::string> u_names;
  model.unconstrained_param_names(u_names, false, false);
  *o << "lp__";
  for (const auto& nm : u_names)
    *o << ",g_" << nm;
  *o << "\n";
  std::vector<int> params_i;
  for (const auto& p : points) {
    std::vector<double> pr(p.data(), p.data() + p.size());
    std::vector<double> grad;
    std::stringstream msg;
    double lp = jacobian ? stan::model::log_prob_grad<true, true>(
                    model, pr, params_i, grad, &msg)
                         : stan::model::log_prob_grad<true, false>(
                             model, pr, params_i, grad, &msg);
    if (msg.str().length() > 0)
      c.logger.info(msg);
    *o << lp;
    for (double g : grad)
      *o << "," << g;
    *o << "\n";
  }
  return RC_OK;
}

int run_diagnose(Ctx& c, stan::model::model_base& model) {
  double eps = c.cfg.d({"method", "diagnose", "test", "gradient", "epsilon"});
  double err = c.cfg.d({"method", "diagnose", "test", "gradient", "error"});
  auto init = init_context(c, c.id, false);
  stan::callbacks::writer init_writer;
  Writer out(open_out(c.out_file, c.sig_figs), "# ");
  write_config(out, c.cfg, c.ri, -1);
  return stan::services::diagnose::diagnose(model, *init, c.seed, c.id,
                                            c.init_radius, eps, err,
                                            c.interrupt, c.logger, init_writer,
                                            out);
}

inline void print_info(std::ostream& o) {
  o << "stan_version_major = " << STAN_MAJOR << "\n";
  o << "stan_version_minor = " << STAN_MINOR << "\n";
  o << "stan_version_patch = " << STAN_PATCH << "\n";
  o << "STAN_THREADS=true\n";
  o << "STAN_MPI=false\n";
  o << "STAN_OPENCL=false\n";
  o << "STAN_NO_RANGE_CHECKS=false\n";
  o << "STAN_CPP_OPTIMS=false\n";
}

inline void print_help(std::ostream& o, const char* prog) {
  o << "Usage: " << prog << " <arg1> <subarg1_1> ... <subarg1_m> ... <arg_n>"
    << " <subarg_n_1> ... <subarg_n_m>\n\n"
    << "Begin by selecting amongst the following inference methods"
    << " and diagnostics,\n"
    << "  sample, optimize, variational, diagnose, generate_quantities,\n"
    << "  pathfinder, log_prob, laplace\n\n"
    << "Or see help information with\n  help       Prints help\n"
    << "  help-all   Prints entire argument tree\n\n"
    << "Additional configuration available by specifying\n"
    << "  id, data, init, random, output, num_threads\n\n"
    << "Other:\n  info       Prints build information\n\n"
    << "Argument tree with defaults:\n";
  std::unique_ptr<Arg> root(build_tree());
  print_tree(o, root.get(), 1, "");
}

int main_impl(int argc, const char* argv[]) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty()) {
    if (args[0] == "info") {
      print_info(std::cout);
      return RC_OK;
    }
    if (args[0] == "help" || args[0] == "help-all" || args[0] == "--help"
        || args[0] == "-h") {
      print_help(std::cout, argv[0]);
      return RC_OK;
    }
  }
  if (args.empty()) {
    print_help(std::cout, argv[0]);
    return RC_USAGE;
  }
  Ctx c;
  c.cfg.root.reset(build_tree());
  try {
    parse_args(c.cfg.root.get(), args);
  } catch (const usage_error& e) {
    std::cerr << e.what() << std::endl;
    std::cerr << "Failed to parse command arguments, cannot run model."
              << " Run '" << argv[0] << " help' for usage." << std::endl;
    return RC_USAGE;
  }
  Config& cfg = c.cfg;
  c.id = cfg.i({"id"});
  if (c.id < 0) {
    std::cerr << "id must be >= 0" << std::endl;
    return RC_USAGE;
  }
  // seed
  long long seed = cfg.i({"random", "seed"});
  if (seed < 0) {
    std::random_device rd;
    unsigned long long s
        = (static_cast<unsigned long long>(rd()) << 1)
          ^ static_cast<unsigned long long>(
              std::chrono::high_resolution_clock::now()
                  .time_since_epoch()
                  .count());
    c.seed = static_cast<unsigned int>(s & 0x7fffffffULL);
    cfg.get({"random", "seed"})->value = std::to_string(c.seed);
  } else {
    if (seed > 4294967295LL) {
      std::cerr << "seed must be in range [0, 4294967295]" << std::endl;
      return RC_USAGE;
    }
    c.seed = static_cast<unsigned int>(seed);
  }
  // init
  std::string init = cfg.str({"init"});
  double r;
  if (parse_double(init, r)) {
    if (r < 0) {
      std::cerr << "init radius must be >= 0" << std::endl;
      return RC_USAGE;
    }
    c.init_radius = r;
  } else {
    c.init_file = init;
    c.init_radius = 2;
    if (!file_exists(init)
        && !file_exists(per_chain_file(init, c.id, true))) {
      std::cerr << "Can't open specified file, \"" << init << "\""
                << std::endl;
      return RC_USAGE;
    }
  }
  c.out_file = cfg.str({"output", "file"});
  c.diag_file = cfg.str({"output", "diagnostic_file"});
  c.refresh = cfg.i({"output", "refresh"});
  c.sig_figs = cfg.i({"output", "sig_figs"});
  if (c.sig_figs < -1 || c.sig_figs > 18) {
    std::cerr << "sig_figs must be in range [-1, 18]" << std::endl;
    return RC_USAGE;
  }
  if (c.refresh < 0)
    c.refresh = 0;
  // threads
  Arg* nt = cfg.get({"num_threads"});
  int num_threads = 1;
  if (!nt->is_default) {
    num_threads = cfg.i({"num_threads"});
  } else if (const char* env = std::getenv("STAN_NUM_THREADS")) {
    long long x;
    if (parse_long(env, x) && (x > 0 || x == -1)) {
      num_threads = static_cast<int>(x);
      nt->value = std::to_string(x);
    }
  }
  if (num_threads == -1)
    num_threads = std::max(1u, std::thread::hardware_concurrency());
  if (num_threads < 1) {
    std::cerr << "num_threads must be positive or -1" << std::endl;
    return RC_USAGE;
  }
  nt->value = std::to_string(num_threads);
  stan::math::init_threadpool_tbb(num_threads);

  if (cfg.b({"output", "save_cmdstan_config"}))
    std::cout << "save_cmdstan_config is not supported by this driver; "
                 "ignored." << std::endl;
  std::string method = cfg.str({"method"});
  std::string data_file = cfg.str({"data", "file"});

  // data + model
  std::shared_ptr<stan::io::var_context> data;
  try {
    data = load_var_context(data_file);
  } catch (const std::exception& e) {
    std::cerr << "Error reading data file: " << e.what() << std::endl;
    return RC_DATAERR;
  }
  stan::model::model_base* model_ptr = nullptr;
  {
    std::stringstream msg;
    try {
      model_ptr = &new_model(*data, c.seed, &msg);
    } catch (const std::exception& e) {
      if (msg.str().length() > 0)
        std::cerr << msg.str() << std::endl;
      std::cerr << "Error in data or transformed data:" << std::endl;
      std::cerr << e.what() << std::endl;
      return RC_SOFTWARE;
    }
    if (msg.str().length() > 0)
      std::cout << msg.str() << std::endl;
  }
  stan::model::model_base& model = *model_ptr;
  c.ri.model_name = model.model_name();
  c.ri.compile_info = model.model_compile_info();
  c.ri.start = utc_now();

  // Echo the configuration to the console as CmdStan does.
  {
    // sampler auto-switch is reflected once the method runs; the console
    // echo shows the parsed configuration.
    std::stringstream ss;
    write_config(ss, cfg, c.ri, "", -1);
    std::cout << ss.str() << std::endl;
  }

  int rc = RC_OK;
  try {
    if (method == "sample")
      rc = run_sample(c, model);
    else if (method == "optimize")
      rc = run_optimize(c, model);
    else if (method == "variational")
      rc = run_variational(c, model);
    else if (method == "pathfinder")
      rc = run_pathfinder(c, model);
    else if (method == "laplace")
      rc = run_laplace(c, model);
    else if (method == "generate_quantities")
      rc = run_generate_quantities(c, model);
    else if (method == "log_prob")
      rc = run_log_prob(c, model);
    else if (method == "diagnose")
      rc = run_diagnose(c, model);
    else
      throw usage_error("unknown method " + method);
  } catch (const usage_error& e) {
    std::cerr << e.what() << std::endl;
    return RC_USAGE;
  } catch (const std::exception& e) {
    std::cerr << "Error: " << e.what() << std::endl;
    return RC_SOFTWARE;
  }
  try {
    write_profile(cfg.str({"output", "profile_file"}));
  } catch (...) {
  }
  std::cout.flush();
  if (rc != 0 && rc != RC_OK) {
    std::cerr << "Method " << method << " failed (return code " << rc << ")."
              << std::endl;
  }
  return rc;
}

}  // namespace pemc_driver

int main(int argc, const char* argv[]) {
  try {
    return pemc_driver::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "Error: " << e.what() << std::endl;
    return pemc_driver::RC_SOFTWARE;
  }
}
