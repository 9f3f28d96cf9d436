// EX·09, the BlockSpec sandbox: read the form, run legality.js, write the verdict. The page was built with
// the opening case already computed (by pallas_course.legality), so with scripts off it still reads right;
// with scripts on, every edit recomputes here, from the constants embedded in [data-legality].

import { BlockSpecError, checkBlock, fmtBytes, fmtMib, sandboxBudget } from "pfz/legality";

const GRID_CELLS_MAX = 16; // the picture draws at most 16 x 16 blocks, then says how many more

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

const fmtInt = (n) => n.toLocaleString("en-US");
const tuple = (xs) => `(${xs.join(", ")})`;

function drawGrid(box, grid) {
  box.replaceChildren();
  const [rows, cols] = grid.length === 1 ? [1, grid[0]] : grid.slice(-2);
  const r = Math.min(rows, GRID_CELLS_MAX);
  const c = Math.min(cols, GRID_CELLS_MAX);
  box.style.setProperty("--cols", c);
  for (let i = 0; i < r; i++) {
    for (let j = 0; j < c; j++) {
      const cell = el("span", { class: i === 0 && j === 0 ? "gcell first" : "gcell" });
      if (i === 0 && j === 0) cell.textContent = grid.length === 1 ? "0" : "0,0";
      box.append(cell);
    }
  }
  if (rows > r || cols > c) box.append(el("span", { class: "more" }, `showing ${r} × ${c} of ${rows} × ${cols}`));
}

function render(root, data, form) {
  const out = (name) => root.querySelector(`[data-out="${name}"]`);
  const values = Object.fromEntries(new FormData(form).entries());
  const shape = [Number(values.m), Number(values.n)];
  const block = [Number(values.bm), Number(values.bn)];
  let v;
  try {
    v = checkBlock(data, shape, block, values.dtype, values.chip);
  } catch (e) {
    if (!(e instanceof BlockSpecError)) throw e;
    out("headline").className = "headline illegal";
    out("headline").textContent = `not a BlockSpec: ${e.message}`;
    out("diagnostics").replaceChildren(el("li", { class: "violation" }, "give whole numbers of at least 1 for every size"));
    root.dataset.legal = "error";
    return;
  }
  const b = sandboxBudget(data, v);
  const chip = data.chips[v.chip];
  root.dataset.legal = String(v.legal);
  const head = out("headline");
  head.className = `headline ${v.legal ? "legal" : "illegal"}`;
  head.textContent = v.legal
    ? `legal: BlockSpec(${v.block_shape.join(", ")}) tiles the ${tuple(v.array_shape)} ${v.dtype} array on ${v.chip}`
    : `illegal: BlockSpec(${v.block_shape.join(", ")}) on the ${tuple(v.array_shape)} ${v.dtype} array on ${v.chip}`;
  out("diagnostics").replaceChildren(
    ...v.violations.map((m) => el("li", { class: "violation" }, m)),
    ...v.notes.map((m) => el("li", { class: "notice" }, m)),
  );
  drawGrid(out("grid-picture"), v.grid);
  out("launch").textContent = `${v.grid.join(" × ")} = ${v.num_blocks} blocks launched`;
  const facts = root.querySelector(".sb-facts");
  const row = (dt, dd, cls = "", name = "") => {
    const div = el("div", cls ? { class: cls } : {});
    div.append(el("dt", {}, dt), el("dd", name ? { "data-out": name } : {}, dd));
    return div;
  };
  facts.replaceChildren(
    row("grid", v.grid.join(" × "), "", "grid"),
    ...v.checks.filter((c) => c.rule !== "partial block")
      .map((c) => row(c.rule, c.expression, `rule ${c.ok ? "ok" : c.severity}`)),
    row("bytes/block", fmtBytes(v.block_bytes), "", "bytes"),
    row(`VMEM working set (copy kernel: ${data.operands} operands × ${data.buffers} buffers)`,
      `${fmtBytes(b.working_set_bytes)} / ${fmtBytes(b.vmem_bytes)}`, "", "working-set"),
    row("scoped VMEM limit (compiler default)", fmtMib(b.limit_bytes), "", "limit"),
  );
  out("meter-label").textContent = `working set against the ${fmtMib(b.limit_bytes)} scoped limit`;
  out("meter").firstElementChild.style.width = `${Math.min(100, (100 * b.working_set_bytes) / b.limit_bytes).toFixed(1)}%`;
  const budget = out("budget");
  budget.className = `budget ${b.fits_limit ? "fits" : "over"}`;
  budget.textContent = b.verdict;
  out("sources").textContent =
    `VMEM budget ${fmtInt(b.vmem_bytes)} B for ${chip.device_kind}, source: ${b.sources.vmem_bytes} · ` +
    `default scoped limit ${fmtInt(b.default_scoped_vmem_bytes)} B, source: ${b.sources.default_scoped_vmem_bytes} · ` +
    `lanes ${chip.lanes} and sublanes ${chip.sublanes}, source: ${chip.sources.lanes} · rules: ${data.sources.lowering} · ` +
    `buffers: ${data.vmem_source}`;
}

export function initSandbox(doc = document) {
  for (const root of doc.querySelectorAll("[data-sandbox]")) {
    const data = JSON.parse(root.querySelector("[data-legality]").textContent);
    const form = root.querySelector("[data-sandbox-form]");
    const update = () => render(root, data, form);
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    form.addEventListener("submit", (event) => event.preventDefault());
    update();
  }
}
