/* The MLP nonlinearities of src/model/layers.c against their definitions in double
 * precision, forward and derivative, over a grid from -12 to 12 plus tiny arguments. The
 * vectorizable forms (an erf approximation, exp-based tanh and sigmoid) are held to a few
 * float ulps of the value's scale: tanh, the one used bare as an activation, relative to
 * tanh(x) itself, so it stays exact near 0 where 1 - exp(-2|x|) would cancel. */
#include <math.h>
#include <stdlib.h>

#include "model/layers.h"
#include "test_util.h"

static double gelu(double x) {
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}
static double f(Activation a, double x) {
    switch (a) {
    case ACT_RELU:
        return x > 0 ? x : 0;
    case ACT_GELU:
        return gelu(x);
    case ACT_GELU_TANH:
        return gelu_tanh(x);
    case ACT_RELU2:
        return x > 0 ? x * x : 0;
    case ACT_TANH:
        return tanh(x);
    case ACT_SILU:
        return x * sigmoid(x);
    default:
        return NAN;
    }
}
static double df(Activation a, double x) { /* central differences of f in double */
    double h = 1e-6 * fmax(1.0, fabs(x));
    if (a == ACT_RELU || a == ACT_RELU2) return x > 0 ? (a == ACT_RELU ? 1 : 2 * x) : 0;
    return (f(a, x + h) - f(a, x - h)) / (2 * h);
}

static const struct {
    Activation a;
    const char *name;
    double tol_f, tol_df; /* in units of max(1, |x|) (f of tanh: of |tanh x|) */
} acts[] = {{ACT_RELU, "relu", 0, 0},
            {ACT_GELU, "gelu", 3e-7, 5e-7},
            {ACT_GELU_TANH, "gelu_tanh", 3e-7, 5e-7},
            {ACT_RELU2, "relu2", 2e-7, 0},
            {ACT_TANH, "tanh", 4e-7, 5e-7},
            {ACT_SILU, "silu", 3e-7, 5e-7}};

/* acts[k] forward and backward against the formulas over a grid and tiny values. */
static void check_activation(size_t k) {
    enum { GRID = 24001, TINY = 64, N = GRID + 2 * TINY };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *d = malloc(N * sizeof *d);
    float *ones = malloc(N * sizeof *ones);
    for (int i = 0; i < GRID; i++)
        x[i] = -12.0f + 0.001f * (float)i;
    for (int i = 0; i < TINY; i++) { /* 1e-8 .. ~1, both signs */
        x[GRID + 2 * i] = (float)pow(10.0, -8.0 + i / 8.0);
        x[GRID + 2 * i + 1] = -x[GRID + 2 * i];
    }
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    {
        Activation a = acts[k].a;
        activation_forward(a, y, x, 1, N);
        activation_backward(a, d, ones, x, 1, N);
        double worst_f = 0, worst_df = 0;
        float at_f = 0, at_df = 0;
        for (int i = 0; i < N; i++) {
            double xi = x[i], scale = a == ACT_TANH ? fabs(tanh(xi)) : fmax(1.0, fabs(xi));
            if (a == ACT_RELU2) scale = fmax(1.0, xi * xi);
            double ef = fabs(y[i] - f(a, xi)) / scale;
            double ed = fabs(d[i] - df(a, xi)) / fmax(1.0, fabs(xi));
            if (ef > worst_f) worst_f = ef, at_f = x[i];
            if (ed > worst_df) worst_df = ed, at_df = x[i];
        }
        fprintf(stderr, "%-10s worst f %.2e (x = %g), f' %.2e (x = %g)\n", acts[k].name, worst_f,
                at_f, worst_df, at_df);
        CHECK_MSG(worst_f <= acts[k].tol_f, "%s: f off by %g at x = %g", acts[k].name, worst_f,
                  at_f);
        CHECK_MSG(worst_df <= acts[k].tol_df, "%s: f' off by %g at x = %g", acts[k].name, worst_df,
                  at_df);
    }
    free(x), free(y), free(d), free(ones);
}

TEST(relu) {
    check_activation(0);
}
TEST(gelu) {
    check_activation(1);
}
TEST(gelu_tanh) {
    check_activation(2);
}
TEST(relu2) {
    check_activation(3);
}
TEST(tanh) {
    check_activation(4);
}
TEST(silu) {
    check_activation(5);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_activations");
}
