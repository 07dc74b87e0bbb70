/*
 * ropefig.js: the in-page half of rope_lib.widgets.
 *
 * Each interactive figure of the book is a <figure class="ropefig"> holding a JSON
 * description (model name, sliders, initial values).  This script builds the
 * controls, recomputes the model's curves in the page with the same formulas as
 * rope_lib (float64 arithmetic) and draws them as SVG.  No kernel, no server, no
 * network.  The Python twin of every model is rope_lib.widgets.compute(); the
 * browser tests compare the two at several slider settings.
 *
 * The script may be included once per figure: it defines window.RopeFig once and
 * mounts every figure that is not mounted yet.
 */
(function () {
  "use strict";
  if (window.RopeFig) {
    window.RopeFig.mountAll();
    return;
  }

  // ------------------------------------------------------------------ math ---
  // theta_i = base^(-2i/d), i = 0 .. d/2 - 1 (rope_lib.theta).
  function theta(d, base) {
    const h = d / 2, out = new Float64Array(h), lb = Math.log(base);
    for (let i = 0; i < h; i++) out[i] = Math.exp(-(2 * i / d) * lb);
    return out;
  }

  // The sinusoidal encodings of positions 0 .. n-1 in Vaswani's layout
  // (rope_lib.sinusoidal): row m, column 2i is sin(m theta_i), column 2i+1 is cos(m theta_i).
  // Returned row-major, n rows of d numbers.
  function sinusoidal(n, d, base) {
    const th = theta(d, base), out = new Float64Array(n * d);
    for (let m = 0; m < n; m++) {
      for (let i = 0; i < d / 2; i++) {
        out[m * d + 2 * i] = Math.sin(m * th[i]);
        out[m * d + 2 * i + 1] = Math.cos(m * th[i]);
      }
    }
    return out;
  }

  // Schedules theta_t over t_i = i / (d/2) (rope_lib.decay, chapter on decay).
  function scheduleTheta(name, d, alpha) {
    const h = d / 2, out = new Float64Array(h);
    for (let i = 0; i < h; i++) {
      const t = i / h;
      if (name === "10000^-t") out[i] = Math.pow(10000, -t);
      else if (name === "1000^-t") out[i] = Math.pow(1000, -t);
      else if (name === "t^alpha") out[i] = Math.pow(t, alpha);
      else if (name === "t") out[i] = t;
      else throw new Error("unknown schedule " + name);
    }
    return out;
  }

  // sum_f cos(x theta_f) for x = 0 .. n-1, by the three-term recurrence
  // cos((x+1)t) = 2 cos(t) cos(xt) - cos((x-1)t): one multiply per term.  Each block of
  // 512 steps restarts from exact cosines, so the rounding error, which grows like
  // (steps)^2 * 2^-53 along the recurrence, stays below 2e-11 per term.
  function cosSums(n, th) {
    const out = new Float64Array(n), BLOCK = 512, F = th.length;
    let f = 0;
    // Four frequencies at a time: four independent recurrences keep the processor
    // busy instead of waiting on one chain of multiply-subtracts.
    for (; f + 4 <= F; f += 4) {
      const a = th[f], b = th[f + 1], c = th[f + 2], e = th[f + 3];
      const ka = 2 * Math.cos(a), kb = 2 * Math.cos(b), kc = 2 * Math.cos(c), ke = 2 * Math.cos(e);
      for (let x0 = 0; x0 < n; x0 += BLOCK) {
        const end = Math.min(n, x0 + BLOCK);
        let pa = Math.cos((x0 - 1) * a), ca = Math.cos(x0 * a);
        let pb = Math.cos((x0 - 1) * b), cb = Math.cos(x0 * b);
        let pc = Math.cos((x0 - 1) * c), cc = Math.cos(x0 * c);
        let pe = Math.cos((x0 - 1) * e), ce = Math.cos(x0 * e);
        for (let x = x0; x < end; x++) {
          out[x] += ca + cb + cc + ce;
          const na = ka * ca - pa, nb = kb * cb - pb, nc = kc * cc - pc, ne = ke * ce - pe;
          pa = ca; ca = na; pb = cb; cb = nb; pc = cc; cc = nc; pe = ce; ce = ne;
        }
      }
    }
    for (; f < F; f++) {
      const t = th[f], k2 = 2 * Math.cos(t);
      for (let x0 = 0; x0 < n; x0 += BLOCK) {
        const end = Math.min(n, x0 + BLOCK);
        let prev = Math.cos((x0 - 1) * t), cur = Math.cos(x0 * t);
        for (let x = x0; x < end; x++) {
          out[x] += cur;
          const next = k2 * cur - prev;
          prev = cur;
          cur = next;
        }
      }
    }
    return out;
  }

  // RoFormer's relative bound (1/(d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{i<j} e^{i x theta_i}.
  function roformerBound(n, th) {
    const F = th.length, out = new Float64Array(n), BLOCK = 256;
    const wr = new Float64Array(F), wi = new Float64Array(F);
    const cr = new Float64Array(F), ci = new Float64Array(F);
    for (let f = 0; f < F; f++) { cr[f] = Math.cos(th[f]); ci[f] = Math.sin(th[f]); }
    for (let x = 0; x < n; x++) {
      if (x % BLOCK === 0) {
        for (let f = 0; f < F; f++) { wr[f] = Math.cos(x * th[f]); wi[f] = Math.sin(x * th[f]); }
      }
      let sr = 0, si = 0, acc = 0;
      for (let f = 0; f < F; f++) {
        sr += wr[f]; si += wi[f];
        acc += Math.sqrt(sr * sr + si * si);
        const nr = wr[f] * cr[f] - wi[f] * ci[f];
        wi[f] = wr[f] * ci[f] + wi[f] * cr[f];
        wr[f] = nr;
      }
      out[x] = acc / F;
    }
    return out;
  }

  function range(n) {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = i;
    return out;
  }

  function fmt(v) {
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2).replace("e+", "e");
    if (Number.isInteger(v)) return String(v);
    return String(+v.toPrecision(4));
  }

  // ---------------------------------------------------------------- models ---
  // Each model maps slider values to {panels, readout}; rope_lib.widgets.compute
  // returns the same structure from rope_lib's own functions.
  const MODELS = {
    // The Gram matrix is computed from the encodings, as rope_lib.widgets does
    // (p @ p.T), never from the closed form g(m - n): that the diagonals come out
    // constant is then something the page computes, not something it assumes.  The
    // encodings are read through api.sinusoidal so that a test can substitute others.
    sinusoidal(v) {
      const d = v.d, base = v.base, n = v.positions;
      const p = api.sinusoidal(n, d, base);
      const z = new Float64Array(n * n);
      for (let m = 0; m < n; m++) {
        for (let k = 0; k <= m; k++) {  // <p_k, p_m> sums the same products: mirror it
          let s = 0;
          for (let j = 0; j < d; j++) s += p[m * d + j] * p[k * d + j];
          z[m * n + k] = s;
          z[k * n + m] = s;
        }
      }
      let lo = Infinity;
      for (let q = 0; q < n * n; q++) lo = Math.min(lo, z[q]);
      // largest range (max - min) of the entries along any one diagonal m - k = const
      let spread = 0;
      for (let o = -(n - 1); o < n; o++) {
        let a = Infinity, b = -Infinity;
        for (let m = Math.max(0, o); m < Math.min(n, n + o); m++) {
          const val = z[m * n + (m - o)];
          if (val < a) a = val;
          if (val > b) b = val;
        }
        spread = Math.max(spread, b - a);
      }
      return {
        panels: [
          { kind: "heatmap", title: "⟨p_m, p_n⟩", xlabel: "position n", ylabel: "position m",
            z: z, nx: n, ny: n, vmin: lo, vmax: d / 2 },
          { kind: "lines", title: "⟨p_0, p_x⟩, row m = 0", xlabel: "distance x",
            ylabel: "inner product", series: [{ label: "⟨p_0, p_x⟩", x: range(n), y: z.slice(0, n) }], vlines: [] },
        ],
        readout: "d = " + d + ", base = " + fmt(base) + ": computed from the encodings, the largest range "
          + "along a diagonal is " + spread.toExponential(1) + " (float64 round-off)",
        spread: spread,
      };
    },

    rotation_2d(v) {
      const q = [1.0, 0.3], k = [0.8, 0.6];
      const rot = (p, a) => [p[0] * Math.cos(a) - p[1] * Math.sin(a), p[0] * Math.sin(a) + p[1] * Math.cos(a)];
      const qm = rot(q, v.m * v.theta), kn = rot(k, v.n * v.theta);
      const score = qm[0] * kn[0] + qm[1] * kn[1];
      return {
        panels: [{
          kind: "arrows", title: "q rotated by mθ, k rotated by nθ", xlabel: "coordinate 0", ylabel: "coordinate 1",
          arrows: [
            { label: "q", x: q[0], y: q[1], faint: true },
            { label: "k", x: k[0], y: k[1], faint: true },
            { label: "R_m q", x: qm[0], y: qm[1] },
            { label: "R_n k", x: kn[0], y: kn[1] },
          ],
        }],
        readout: "score (R_m q)·(R_n k) = " + score.toFixed(4) + " depends on n − m = " + (v.n - v.m) + " only",
        score: score,
      };
    },

    ones_score(v) {
      const d = v.d, base = v.base, n = v.max_distance + 1;
      const y = cosSums(n, theta(d, base));
      for (let i = 0; i < n; i++) y[i] *= 2;
      return {
        panels: [{ kind: "lines", title: "RoPE score of q = k = ones", xlabel: "relative distance x",
          ylabel: "score 2 Σ cos(x θ_i)", series: [{ label: "score", x: range(n), y: y }], vlines: [] }],
        readout: "d = " + d + ", base = " + fmt(base) + ": score at x = 0 is d = " + d,
      };
    },

    schedules(v) {
      const d = v.d, n = v.max_distance + 1, names = ["10000^-t", "1000^-t", "t^alpha", "t"];
      const series = names.map((name) => {
        const y = cosSums(n, scheduleTheta(name, d, v.alpha));
        for (let i = 0; i < n; i++) y[i] /= d / 2;
        return { label: name === "t^alpha" ? "t^" + fmt(v.alpha) : name, x: range(n), y: y };
      });
      return {
        panels: [{ kind: "lines", title: "(2/d) Σ cos(x θ_t) for four schedules", xlabel: "relative distance x",
          ylabel: "normalised score", series: series, vlines: [] }],
        readout: "d = " + d + ", α = " + fmt(v.alpha),
      };
    },

    roformer_bound(v) {
      const d = v.d, base = v.base, n = v.max_distance + 1;
      const y = roformerBound(n, theta(d, base));
      return {
        panels: [{ kind: "lines", title: "RoFormer's relative upper bound", xlabel: "relative distance x",
          ylabel: "(1/(d/2)) Σ_j |S_j|", series: [{ label: "bound", x: range(n), y: y }], vlines: [] }],
        readout: "d = " + d + ", base = " + fmt(base),
      };
    },

    similarity_margin(v) {
      const d = v.d, base = v.base, n = v.max_m + 1;
      const y = cosSums(n, theta(d, base));
      let first = -1;
      for (let m = 0; m < n; m++) if (y[m] < 0) { first = m; break; }
      return {
        panels: [{ kind: "lines", title: "B_m = Σ cos(m θ_i)", xlabel: "distance m", ylabel: "B_m",
          series: [{ label: "B_m", x: range(n), y: y }],
          vlines: first >= 0 ? [{ x: first, label: "first m with B_m < 0: " + first }] : [] }],
        readout: first >= 0
          ? "d = " + d + ", base = " + fmt(base) + ": B_m ≥ 0 for m < " + first + ", so the context is at most " + first
          : "d = " + d + ", base = " + fmt(base) + ": B_m ≥ 0 on the whole plotted range (m ≤ " + (n - 1) + ")",
        horizon: first,
      };
    },
  };

  // --------------------------------------------------------------- drawing ---
  const NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
    const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((s) => s * mag).find((s) => s >= raw);
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return ticks;
  }

  // x ticks of a log axis (x holds log10 of the value): the integer exponents.
  function logTicks(lo, hi) {
    const ticks = [];
    for (let t = Math.ceil(lo - 1e-9); t <= hi + 1e-9; t++) ticks.push(t);
    return ticks;
  }

  function frame(svg, box, panel, xlo, xhi, ylo, yhi) {
    const sx = (x) => box.x + ((x - xlo) / (xhi - xlo)) * box.w;
    const sy = (y) => box.y + box.h - ((y - ylo) / (yhi - ylo)) * box.h;
    const g = el("g", { class: "ropefig-axes" }, svg);
    const xticks = panel.xlog ? logTicks(xlo, xhi) : niceTicks(Math.min(xlo, xhi), Math.max(xlo, xhi), 6);
    for (const t of xticks) {
      el("line", { x1: sx(t), x2: sx(t), y1: box.y, y2: box.y + box.h, class: "ropefig-grid" }, g);
      el("text", { x: sx(t), y: box.y + box.h + 16, "text-anchor": "middle", class: "ropefig-tick" }, g,
        fmt(panel.xlog ? Math.pow(10, t) : t));
    }
    for (const t of niceTicks(Math.min(ylo, yhi), Math.max(ylo, yhi), 5)) {
      el("line", { x1: box.x, x2: box.x + box.w, y1: sy(t), y2: sy(t), class: "ropefig-grid" }, g);
      el("text", { x: box.x - 6, y: sy(t) + 4, "text-anchor": "end", class: "ropefig-tick" }, g, fmt(t));
    }
    el("rect", { x: box.x, y: box.y, width: box.w, height: box.h, class: "ropefig-box" }, g);
    el("text", { x: box.x + box.w / 2, y: box.y + box.h + 36, "text-anchor": "middle", class: "ropefig-label" }, g, panel.xlabel);
    el("text", { x: 0, y: 0, transform: "translate(" + (box.x - 48) + "," + (box.y + box.h / 2) + ") rotate(-90)",
      "text-anchor": "middle", class: "ropefig-label" }, g, panel.ylabel);
    el("text", { x: box.x + box.w / 2, y: box.y - 10, "text-anchor": "middle", class: "ropefig-title" }, g, panel.title);
    return { sx: sx, sy: sy };
  }

  // Polyline through at most two points (min and max) per pixel column, so a
  // curve of 10^5 points stays a light path that looks the same.
  function pathFor(x, y, sx, sy, x0pix, width) {
    const n = x.length, parts = [];
    if (n <= 2 * width) {
      for (let i = 0; i < n; i++) parts.push((i ? "L" : "M") + sx(x[i]).toFixed(1) + " " + sy(y[i]).toFixed(1));
      return parts.join("");
    }
    let col = -1, lo = 0, hi = 0, ilo = 0, ihi = 0;
    const flush = () => {
      const a = Math.min(ilo, ihi), b = Math.max(ilo, ihi);
      for (const i of a === b ? [a] : [a, b]) parts.push((parts.length ? "L" : "M") + sx(x[i]).toFixed(1) + " " + sy(y[i]).toFixed(1));
    };
    for (let i = 0; i < n; i++) {
      const c = Math.floor(sx(x[i]) - x0pix);
      if (c !== col) {
        if (col >= 0) flush();
        col = c; lo = hi = y[i]; ilo = ihi = i;
      } else {
        if (y[i] < lo) { lo = y[i]; ilo = i; }
        if (y[i] > hi) { hi = y[i]; ihi = i; }
      }
    }
    flush();
    return parts.join("");
  }

  // A panel may set xlog (log-scaled x axis), ylim ([lo, hi], fixed) and, per series,
  // lo and hi (a shaded band, e.g. one standard error around a mean).
  function drawLines(svg, box, panel) {
    const fx = panel.xlog ? Math.log10 : (x) => x;
    let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity;
    for (const s of panel.series) {
      for (let i = 0; i < s.x.length; i++) {
        const xv = fx(s.x[i]), yv = s.y[i];
        if (xv < xlo) xlo = xv; if (xv > xhi) xhi = xv;
        if (yv < ylo) ylo = yv; if (yv > yhi) yhi = yv;
      }
    }
    if (panel.ylim) {
      ylo = panel.ylim[0]; yhi = panel.ylim[1];
    } else {
      const pad = (yhi - ylo) * 0.05 || 1;
      ylo -= pad; yhi += pad;
    }
    if (xhi === xlo) xhi = xlo + 1;
    const t = frame(svg, box, panel, xlo, xhi, ylo, yhi);
    if (ylo < 0 && yhi > 0) el("line", { x1: box.x, x2: box.x + box.w, y1: t.sy(0), y2: t.sy(0), class: "ropefig-zero" }, svg);
    panel.series.forEach((s, k) => {
      const X = Array.from(s.x, fx);
      if (s.lo && s.hi) {
        const pts = X.map((x, i) => t.sx(x).toFixed(1) + "," + t.sy(s.hi[i]).toFixed(1));
        for (let i = X.length - 1; i >= 0; i--) pts.push(t.sx(X[i]).toFixed(1) + "," + t.sy(s.lo[i]).toFixed(1));
        el("polygon", { points: pts.join(" "), class: "ropefig-band ropefig-s" + (k % 6) }, svg);
      }
      el("path", { d: pathFor(X, s.y, t.sx, t.sy, box.x, box.w), class: "ropefig-line ropefig-s" + (k % 6) }, svg);
    });
    (panel.vlines || []).forEach((v, j) => {
      const xv = fx(v.x);
      if (xv < xlo || xv > xhi) return;
      el("line", { x1: t.sx(xv), x2: t.sx(xv), y1: box.y, y2: box.y + box.h, class: "ropefig-vline" }, svg);
      const right = t.sx(xv) > box.x + 0.6 * box.w;  // label to the left of a line near the edge
      el("text", { x: t.sx(xv) + (right ? -4 : 4), y: box.y + 14 + 14 * j, "text-anchor": right ? "end" : "start",
        class: "ropefig-tick ropefig-vlabel" }, svg, v.label);
    });
    if (panel.series.length > 1) {
      const lg = el("g", { class: "ropefig-legend" }, svg);
      const low = panel.legend === "lower left", n = panel.series.length;
      panel.series.forEach((s, k) => {
        const y = low ? box.y + box.h - 40 - 16 * (n - 1 - k) : box.y + 14 + 16 * k;
        const x = low ? box.x + 10 : box.x + box.w - 120;
        el("line", { x1: x, x2: x + 22, y1: y - 4, y2: y - 4, class: "ropefig-line ropefig-s" + (k % 6) }, lg);
        el("text", { x: x + 28, y: y, class: "ropefig-tick" }, lg, s.label);
      });
    }
  }

  // cividis, sampled at 9 points and interpolated linearly (colour-blind safe).
  const CIVIDIS = [[0, 34, 78], [18, 53, 112], [59, 73, 108], [87, 92, 109], [112, 113, 115],
    [138, 134, 120], [166, 157, 117], [197, 182, 102], [229, 209, 75], [255, 234, 70]];
  function colour(u) {
    u = Math.min(1, Math.max(0, u)) * (CIVIDIS.length - 1);
    const i = Math.min(CIVIDIS.length - 2, Math.floor(u)), f = u - i, a = CIVIDIS[i], b = CIVIDIS[i + 1];
    return [a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2])];
  }

  function drawHeatmap(svg, box, panel) {
    const side = Math.min(box.w, box.h), sq = { x: box.x, y: box.y, w: side, h: side };
    const t = frame(svg, sq, panel, -0.5, panel.nx - 0.5, panel.ny - 0.5, -0.5);
    const canvas = document.createElement("canvas");
    canvas.width = panel.nx; canvas.height = panel.ny;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(panel.nx, panel.ny);
    const span = panel.vmax - panel.vmin || 1;
    for (let p = 0; p < panel.nx * panel.ny; p++) {
      const c = colour((panel.z[p] - panel.vmin) / span);
      img.data[4 * p] = c[0]; img.data[4 * p + 1] = c[1]; img.data[4 * p + 2] = c[2]; img.data[4 * p + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    const image = el("image", { x: t.sx(-0.5), y: t.sy(-0.5), width: sq.w, height: sq.h,
      preserveAspectRatio: "none", style: "image-rendering: pixelated" }, null);
    image.setAttribute("href", canvas.toDataURL());
    svg.insertBefore(image, svg.querySelector(".ropefig-axes").nextSibling);
    // colour bar
    const cb = { x: sq.x + sq.w + 16, y: sq.y, w: 12, h: sq.h };
    for (let k = 0; k < 32; k++) {
      const c = colour(1 - k / 31);
      el("rect", { x: cb.x, y: cb.y + (k * cb.h) / 32, width: cb.w, height: cb.h / 32 + 0.5,
        fill: "rgb(" + c.map(Math.round).join(",") + ")" }, svg);
    }
    el("text", { x: cb.x + cb.w + 4, y: cb.y + 10, class: "ropefig-tick" }, svg, fmt(panel.vmax));
    el("text", { x: cb.x + cb.w + 4, y: cb.y + cb.h, class: "ropefig-tick" }, svg, fmt(panel.vmin));
  }

  function drawArrows(svg, box, panel) {
    let r = 0;
    for (const a of panel.arrows) r = Math.max(r, Math.hypot(a.x, a.y));
    r *= 1.2;
    const side = Math.min(box.w, box.h), sq = { x: box.x, y: box.y, w: side, h: side };
    const t = frame(svg, sq, panel, -r, r, -r, r);
    const defs = el("defs", {}, svg);
    panel.arrows.forEach((a, k) => {
      const id = "ropefig-head-" + Math.random().toString(36).slice(2);
      const m = el("marker", { id: id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
      el("path", { d: "M0 0L10 5L0 10z", class: "ropefig-head ropefig-s" + (k % 6) }, m);
      el("line", { x1: t.sx(0), y1: t.sy(0), x2: t.sx(a.x), y2: t.sy(a.y), "marker-end": "url(#" + id + ")",
        class: "ropefig-line ropefig-s" + (k % 6) + (a.faint ? " ropefig-faint" : "") }, svg);
      el("text", { x: t.sx(a.x) + 6, y: t.sy(a.y) - 6, class: "ropefig-tick" }, svg, a.label);
    });
  }

  function render(root, data) {
    const host = root.querySelector(".ropefig-plot");
    host.textContent = "";
    const panels = data.panels, width = panels.length === 1 ? 640 : 380, height = 300;
    const svg = el("svg", { viewBox: "0 0 " + width * panels.length + " " + height, role: "img",
      style: "max-width: " + Math.round(1.2 * width * panels.length) + "px",
      class: "ropefig-svg", "aria-label": root.dataset.alt + " (" + data.readout + ")" }, host);
    panels.forEach((panel, k) => {
      const box = { x: k * width + 64, y: 30, w: width - (panel.kind === "heatmap" ? 124 : 80), h: height - 80 };
      if (panel.kind === "lines") drawLines(svg, box, panel);
      else if (panel.kind === "heatmap") drawHeatmap(svg, box, panel);
      else if (panel.kind === "arrows") drawArrows(svg, box, panel);
    });
    root.querySelector(".ropefig-readout").textContent = data.readout;
  }

  // -------------------------------------------------------------- controls ---
  function valueOf(p, input) {
    if (p.kind === "choice") return input.value;
    const raw = parseFloat(input.value);
    return p.kind === "log" ? Math.pow(10, raw) : raw;
  }

  function mount(root) {
    root.dataset.mounted = "1";
    const spec = JSON.parse(root.querySelector("script.ropefig-spec").textContent);
    const controls = root.querySelector(".ropefig-controls");
    const inputs = {};
    const update = () => {
      const values = {};
      for (const p of spec.params) values[p.name] = valueOf(p, inputs[p.name]);
      const t0 = performance.now();
      const data = MODELS[spec.model](values);
      render(root, data);
      const ms = performance.now() - t0;
      root.ropefig = { model: spec.model, values: values, data: data, ms: ms };
      root.dataset.lastMs = ms.toFixed(2);
      for (const p of spec.params) {
        const out = root.querySelector("output[for='" + inputs[p.name].id + "']");
        if (out) out.textContent = p.kind === "choice" ? values[p.name] : fmt(values[p.name]);
        if (p.kind !== "choice") inputs[p.name].setAttribute("aria-valuetext", p.label + " " + fmt(values[p.name]));
      }
    };
    spec.params.forEach((p, k) => {
      const id = spec.id + "-" + k, row = document.createElement("div");
      row.className = "ropefig-control";
      const label = document.createElement("label");
      label.htmlFor = id; label.textContent = p.label;
      row.appendChild(label);
      let input;
      if (p.kind === "choice") {
        input = document.createElement("select");
        for (const c of p.choices) {
          const o = document.createElement("option");
          o.value = c; o.textContent = c; if (c === p.value) o.selected = true;
          input.appendChild(o);
        }
      } else {
        input = document.createElement("input");
        input.type = "range";
        input.min = p.min; input.max = p.max; input.step = p.step; input.value = p.value;
      }
      input.id = id; input.name = p.name;
      input.addEventListener("input", update);
      row.appendChild(input);
      if (p.kind !== "choice") {
        const out = document.createElement("output");
        out.htmlFor = id;
        out.setAttribute("for", id);
        row.appendChild(out);
      }
      controls.appendChild(row);
      inputs[p.name] = input;
    });
    update();
  }

  function mountAll() {
    document.querySelectorAll("figure.ropefig:not([data-mounted])").forEach(mount);
  }

  const api = { models: MODELS, theta: theta, sinusoidal: sinusoidal, cosSums: cosSums, mountAll: mountAll };
  window.RopeFig = api;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
})();
