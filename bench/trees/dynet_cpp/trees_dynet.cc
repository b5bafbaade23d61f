// bench/trees/dynet_cpp/trees_dynet.cc — the DyNet baseline of MODELS.md in
// C++ against libdynet (built by setup.sh from DyNet's source distribution),
// so the `dynet_cpp` side of `ravel bench trees` times DyNet with no Python
// in the loop (issue 13). It builds the same graph as trees_dynet.py, op for
// op and in the same order (parameter nodes created at their first use in a
// graph, as the Python binding does), so the two sides differ only in the
// language the graph is built from.
//
//   trees_dynet_cpp [--dynet-autobatch 1 --dynet-mem ... --dynet-seed 1]
//                   MODEL H WEIGHTS_DIR
//
// WEIGHTS_DIR holds one .npy per parameter (float32, C order, MODELS.md's
// names: trees_ref.save_weights). Then commands on stdin, one per line, one
// reply line each on stdout (bench/trees/trees_dynet_cpp.py drives it):
//
//   batches FILE   read a list of batches (int32 stream below)  -> "ok NBATCHES"
//   run I          one call on batch I: a fresh ComputationGraph, the graph
//                  built, forward() on the scalar that depends on every root
//                  -> "GRAPH_S FORWARD_S" (seconds; graph includes tearing the
//                  graph down, which Python's renew_cg does at its start)
//   dump I FILE    run batch I and write every node's states (MODELS.md's
//                  output: h, then c or A) as float32, row-major, structures
//                  concatenated, nodes in their own numbering  -> "ok"
//
// Batch stream (int32, native order): NBATCHES, then per batch NSTRUCTS,
// per structure N, NROOTS, ROOTS..., then per node WORD (-1: none), NCHILD,
// CHILD... (children in order, node ids local to the structure).
#include <dynet/dynet.h>
#include <dynet/expr.h>
#include <dynet/init.h>
#include <dynet/model.h>
#include <dynet/param-init.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace dynet;

namespace {

const unsigned MV_WORDS = 1024;  // trees_ref.MV_WORDS

[[noreturn]] void die(const std::string& msg) {
    std::cerr << "trees_dynet_cpp: " << msg << std::endl;
    std::exit(1);
}

// ---- .npy (version 1-3, '<f4', C order) --------------------------------

struct Array {
    std::vector<long> shape;
    std::vector<float> data;
};

Array read_npy(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die("cannot open " + path);
    unsigned char magic[8];
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0)
        die(path + ": not a .npy file");
    unsigned hlen = 0;
    unsigned char l[4] = {0, 0, 0, 0};
    size_t nl = magic[6] == 1 ? 2 : 4;
    if (std::fread(l, 1, nl, f) != nl) die(path + ": truncated header");
    hlen = l[0] | l[1] << 8 | l[2] << 16 | (unsigned)l[3] << 24;
    std::string h(hlen, '\0');
    if (std::fread(&h[0], 1, hlen, f) != hlen) die(path + ": truncated header");
    if (h.find("'descr': '<f4'") == std::string::npos) die(path + ": not little-endian float32");
    if (h.find("'fortran_order': False") == std::string::npos) die(path + ": not C order");
    size_t p = h.find("'shape': (");
    if (p == std::string::npos) die(path + ": no shape");
    Array a;
    size_t n = 1;
    for (p += 10; h[p] != ')';) {
        if (h[p] == ',' || h[p] == ' ') { p++; continue; }
        char* end;
        long d = std::strtol(h.c_str() + p, &end, 10);
        if (end == h.c_str() + p || d < 0) die(path + ": bad shape");
        a.shape.push_back(d);
        n *= (size_t)d;
        p = end - h.c_str();
    }
    a.data.resize(n);
    if (std::fread(a.data.data(), sizeof(float), n, f) != n) die(path + ": truncated data");
    std::fclose(f);
    return a;
}

// DyNet stores a matrix column-major: the values of numpy's W[:, c0:c1]
// ([out, in] row-major), column by column (parameters_from_numpy's
// flatten(order='F')).
std::vector<float> col_major(const Array& a, long c0, long c1) {
    if (a.shape.size() != 2) die("expected a matrix");
    long rows = a.shape[0], cols = a.shape[1];
    std::vector<float> v;
    v.reserve(rows * (c1 - c0));
    for (long c = c0; c < c1; c++)
        for (long r = 0; r < rows; r++) v.push_back(a.data[r * cols + c]);
    return v;
}

// ---- structures --------------------------------------------------------

struct Struct {
    int n = 0;
    std::vector<int> roots, word;
    std::vector<std::vector<int>> children;
};
typedef std::vector<Struct> Batch;

std::vector<Batch> read_batches(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die("cannot open " + path);
    std::vector<int> s;
    int buf[4096];
    size_t k;
    while ((k = std::fread(buf, sizeof(int), 4096, f)) > 0) s.insert(s.end(), buf, buf + k);
    std::fclose(f);
    size_t p = 0;
    auto next = [&]() {
        if (p >= s.size()) die(path + ": truncated batch stream");
        return s[p++];
    };
    std::vector<Batch> out(next());
    for (Batch& b : out) {
        b.resize(next());
        for (Struct& st : b) {
            st.n = next();
            st.roots.resize(next());
            for (int& r : st.roots) r = next();
            st.word.resize(st.n);
            st.children.resize(st.n);
            for (int v = 0; v < st.n; v++) {
                st.word[v] = next();
                st.children[v].resize(next());
                for (int& c : st.children[v]) {
                    c = next();
                    if (c < 0 || c >= st.n) die(path + ": child out of range");
                }
            }
            for (int r : st.roots)
                if (r < 0 || r >= st.n) die(path + ": root out of range");
        }
    }
    if (p != s.size()) die(path + ": trailing data");
    return out;
}

// ---- the models (trees_dynet.py's DyModel.node, op for op) ---------------

// A node's states: h, and c (LSTMs) or A (MV-RNN) as `second`.
struct State {
    Expression h, second;
    bool has_second = false;
};

class TreeModel {
public:
    TreeModel(const std::string& model, unsigned H, const std::string& dir) : m(model), H(H) {
        std::vector<std::string> names;
        if (m == "treefc") names = {"Wl", "Wr", "b"};
        else if (m == "treernn") names = {};
        else if (m == "treegru") names = {"W_z", "W_h", "b_z", "b_h", "U_z", "U_r", "U_h", "b_r"};
        else if (m == "treelstm") names = {"W_iou", "b_iou", "U_iou", "U_f", "b_f"};
        else if (m == "mvrnn") names = {"Mat", "W", "b", "WM"};
        else if (m == "dagrnn") names = {"U", "W", "b"};
        else if (m == "lstm") names = {"W_ih", "W_hh", "b"};
        else if (m == "gru") names = {"W_ih", "W_hh", "b_ih", "b_hh"};
        else die("unknown model " + m);
        Array emb = read_npy(dir + "/Emb.npy");
        if (emb.shape.size() != 2 || emb.shape[1] != (long)H) die("Emb: shape is not [V, H]");
        V = emb.shape[0];
        // lookup_parameters_from_numpy: entry w is Emb[w] (C order = its
        // flatten(order='F') of the swapped axes)
        E = pc.add_lookup_parameters(V, Dim({H}), ParameterInitFromVector(emb.data));
        for (const std::string& k : names) {
            Array a = read_npy(dir + "/" + k + ".npy");
            if (k == "Mat") {
                // entry w is the H x H matrix Mat[w], column-major
                if (a.shape.size() != 3 || a.shape[1] != (long)H || a.shape[2] != (long)H)
                    die("Mat: shape is not [n, H, H]");
                std::vector<float> v;
                v.reserve(a.data.size());
                for (long w = 0; w < a.shape[0]; w++)
                    for (unsigned j = 0; j < H; j++)
                        for (unsigned i = 0; i < H; i++) v.push_back(a.data[(w * H + i) * H + j]);
                Mat = pc.add_lookup_parameters(a.shape[0], Dim({H, H}), ParameterInitFromVector(v));
            } else if (m == "mvrnn" && (k == "W" || k == "WM")) {
                add(k + "l", Dim({H, H}), col_major(a, 0, H));
                add(k + "r", Dim({H, H}), col_major(a, H, 2 * H));
            } else if (a.shape.size() == 1) {
                add(k, Dim({(unsigned)a.shape[0]}), a.data);
            } else {
                add(k, Dim({(unsigned)a.shape[0], (unsigned)a.shape[1]}), col_major(a, 0, a.shape[1]));
            }
        }
    }

    // One call: the graph of a batch (every node's states, in each
    // structure's numbering) and the scalar forward() is run on.
    Expression graph(ComputationGraph& cg, const Batch& b, std::vector<std::vector<State>>& outs) {
        this->cg = &cg;
        expr.clear();
        outs.assign(b.size(), {});
        std::vector<Expression> tops;
        for (size_t i = 0; i < b.size(); i++) {
            const Struct& s = b[i];
            outs[i].assign(s.n, State());
            std::vector<char> done(s.n, 0);
            for (int r : s.roots) {
                rec(s, r, outs[i], done);
                tops.push_back(sum_elems(outs[i][r].h));
                if (outs[i][r].has_second) tops.push_back(sum_elems(outs[i][r].second));
            }
        }
        return sum(tops);
    }

    unsigned hidden() const { return H; }
    bool matrix_state() const { return m == "mvrnn"; }

private:
    std::string m;
    unsigned H;
    long V = 0;
    ParameterCollection pc;
    LookupParameter E, Mat;
    std::map<std::string, Parameter> par;
    ComputationGraph* cg = nullptr;
    std::map<std::string, Expression> expr;  // this graph's parameter nodes

    void add(const std::string& k, const Dim& d, const std::vector<float>& v) {
        par[k] = pc.add_parameters(d, ParameterInitFromVector(v));
    }

    // A parameter's node, made at its first use in the graph: the Python
    // binding's Parameters.c() caches one node per graph the same way.
    Expression P(const std::string& k) {
        auto it = expr.find(k);
        if (it != expr.end()) return it->second;
        auto p = par.find(k);
        if (p == par.end()) die("no parameter " + k);
        return expr[k] = parameter(*cg, p->second);
    }

    void rec(const Struct& s, int v, std::vector<State>& st, std::vector<char>& done) {
        if (done[v]) return;
        for (int c : s.children[v]) rec(s, c, st, done);
        st[v] = node(s, v, st);
        done[v] = 1;
    }

    static State one(Expression h) {
        State r;
        r.h = h;
        return r;
    }
    static State two(Expression h, Expression second) {
        State r;
        r.h = h;
        r.second = second;
        r.has_second = true;
        return r;
    }

    // Every op in trees_dynet.py's order (Python evaluates left to right; C++
    // argument order is unspecified, hence one statement per op).
    State node(const Struct& s, int v, const std::vector<State>& st) {
        ComputationGraph& g = *cg;
        std::vector<const State*> ch;
        for (int c : s.children[v]) ch.push_back(&st[c]);
        int w = s.word[v];
        Expression x;
        if (w >= 0) {
            if (w >= V) die("word id out of range");
            x = lookup(g, E, (unsigned)w);
        }
        if (m == "treernn") {
            if (ch.empty()) return one(x);
            Expression a = ch[0]->h + ch[1]->h;
            return one(tanh(a));
        }
        if (m == "treefc") {
            if (ch.empty()) return one(x);
            Expression a = affine_transform({P("b"), P("Wl"), ch[0]->h, P("Wr"), ch[1]->h});
            return one(tanh(a));
        }
        if (m == "treelstm") {
            Expression iou, c;
            if (ch.empty()) {
                iou = affine_transform({P("b_iou"), P("W_iou"), x});
                Expression i = logistic(pick_range(iou, 0, H));
                Expression u = tanh(pick_range(iou, 2 * H, 3 * H));
                c = cmult(i, u);
            } else {
                std::vector<Expression> hk;
                for (const State* k : ch) hk.push_back(k->h);
                Expression hs = sum(hk);
                iou = affine_transform({P("b_iou"), P("U_iou"), hs});
                Expression i = logistic(pick_range(iou, 0, H));
                Expression u = tanh(pick_range(iou, 2 * H, 3 * H));
                std::vector<Expression> terms{cmult(i, u)};
                for (const State* k : ch) {
                    Expression f = logistic(affine_transform({P("b_f"), P("U_f"), k->h}));
                    terms.push_back(cmult(f, k->second));
                }
                c = sum(terms);
            }
            Expression o = logistic(pick_range(iou, H, 2 * H));
            Expression tc = tanh(c);
            return two(cmult(o, tc), c);
        }
        if (m == "treegru") {
            if (ch.empty()) {
                // 1 - sigmoid(a) = sigmoid(-a)
                Expression zc = logistic(-affine_transform({P("b_z"), P("W_z"), x}));
                Expression n = tanh(affine_transform({P("b_h"), P("W_h"), x}));
                return one(cmult(zc, n));
            }
            std::vector<Expression> hk;
            for (const State* k : ch) hk.push_back(k->h);
            Expression hs = sum(hk);
            Expression za = affine_transform({P("b_z"), P("U_z"), hs});
            Expression z = logistic(za);
            Expression zc = logistic(-za);
            std::vector<Expression> rk;
            for (const State* k : ch) {
                Expression r = logistic(affine_transform({P("b_r"), P("U_r"), k->h}));
                rk.push_back(cmult(r, k->h));
            }
            Expression rh = sum(rk);
            Expression zh = cmult(z, hs);
            Expression n = tanh(affine_transform({P("b_h"), P("U_h"), rh}));
            Expression zn = cmult(zc, n);
            return one(zh + zn);
        }
        if (m == "mvrnn") {
            if (ch.empty()) return two(x, lookup(g, Mat, (unsigned)w < MV_WORDS ? (unsigned)w : 0u));
            const State &l = *ch[0], &r = *ch[1];
            Expression al = r.second * l.h;
            Expression ar = l.second * r.h;
            Expression h = tanh(affine_transform({P("b"), P("Wl"), al, P("Wr"), ar}));
            Expression ml = P("WMl") * l.second;
            Expression mr = P("WMr") * r.second;
            return two(h, ml + mr);
        }
        if (m == "dagrnn") {
            if (ch.empty()) return one(rectify(affine_transform({P("b"), P("U"), x})));
            std::vector<Expression> hk;
            for (const State* k : ch) hk.push_back(k->h);
            Expression hs = sum(hk);
            return one(rectify(affine_transform({P("b"), P("U"), x, P("W"), hs})));
        }
        if (m == "lstm") {
            Expression gt = ch.empty() ? affine_transform({P("b"), P("W_ih"), x})
                                       : affine_transform({P("b"), P("W_ih"), x, P("W_hh"), ch[0]->h});
            Expression i = logistic(pick_range(gt, 0, H));
            Expression u = tanh(pick_range(gt, 2 * H, 3 * H));
            Expression c = cmult(i, u);
            if (!ch.empty()) {
                Expression f = logistic(pick_range(gt, H, 2 * H));
                Expression fc = cmult(f, ch[0]->second);
                c = c + fc;
            }
            Expression o = logistic(pick_range(gt, 3 * H, 4 * H));
            Expression tc = tanh(c);
            return two(cmult(o, tc), c);
        }
        if (m == "gru") {
            Expression gi = affine_transform({P("b_ih"), P("W_ih"), x});
            Expression hp, gh;
            if (!ch.empty()) {
                hp = ch[0]->h;
                gh = affine_transform({P("b_hh"), P("W_hh"), hp});
            } else {
                gh = P("b_hh") + 0.f;
            }
            Expression ri = pick_range(gi, 0, H);
            Expression rh = pick_range(gh, 0, H);
            Expression r = logistic(ri + rh);
            Expression zi = pick_range(gi, H, 2 * H);
            Expression zhh = pick_range(gh, H, 2 * H);
            Expression za = zi + zhh;
            Expression z = logistic(za);
            Expression zc = logistic(-za);
            Expression ni = pick_range(gi, 2 * H, 3 * H);
            Expression nh = cmult(r, pick_range(gh, 2 * H, 3 * H));
            Expression n = tanh(ni + nh);
            Expression h = cmult(zc, n);
            if (ch.empty()) return one(h);
            Expression zp = cmult(z, hp);
            return one(h + zp);
        }
        die("unknown model " + m);
    }
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes v's values row-major (a matrix is column-major in DyNet).
void write_value(FILE* f, const Expression& e) {
    const Tensor& t = e.value();
    std::vector<float> v = as_vector(t);
    if (t.d.nd == 2) {
        unsigned R = t.d[0], C = t.d[1];
        std::vector<float> r(v.size());
        for (unsigned i = 0; i < R; i++)
            for (unsigned j = 0; j < C; j++) r[i * C + j] = v[j * R + i];
        v.swap(r);
    }
    if (std::fwrite(v.data(), sizeof(float), v.size(), f) != v.size()) die("write failed");
}

}  // namespace

int main(int argc, char** argv) {
    dynet::initialize(argc, argv);
    if (argc != 4) die("usage: trees_dynet_cpp [--dynet-...] MODEL H WEIGHTS_DIR");
    TreeModel model(argv[1], (unsigned)std::atoi(argv[2]), argv[3]);
    std::vector<Batch> batches;
    std::string line;
    std::cout.precision(9);
    std::cout << "ready" << std::endl;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd, path;
        size_t i = 0;
        in >> cmd;
        if (cmd == "batches") {
            in >> path;
            batches = read_batches(path);
            std::cout << "ok " << batches.size() << std::endl;
            continue;
        }
        if (!(in >> i) || i >= batches.size()) die("bad command: " + line);
        std::vector<std::vector<State>> outs;
        double t0 = now(), t1, t2;
        {
            std::unique_ptr<ComputationGraph> cg(new ComputationGraph());
            Expression fin = model.graph(*cg, batches[i], outs);
            t1 = now();
            as_scalar(fin.value());
            t2 = now();
            if (cmd == "dump") {
                in >> path;
                FILE* f = std::fopen(path.c_str(), "wb");
                if (!f) die("cannot write " + path);
                for (const auto& so : outs)
                    for (const State& s : so) write_value(f, s.h);
                for (const auto& so : outs)
                    for (const State& s : so)
                        if (s.has_second) write_value(f, s.second);
                std::fclose(f);
            } else if (cmd != "run") {
                die("bad command: " + line);
            }
            outs.clear();
        }
        double t3 = now();
        if (cmd == "dump") std::cout << "ok" << std::endl;
        else std::cout << (t1 - t0) + (t3 - t2) << " " << t2 - t1 << std::endl;
    }
    return 0;
}
