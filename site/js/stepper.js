// Steppers: EX·02, EX·07, EX·12 and the guided walks. Markup that already reads as an ordered list of steps
// ([data-stepper] > .steps > [data-step], each with data-lines) becomes one step at a time, with prev/next
// buttons, j/k on the keyboard (k back, j on; arrows when the stepper has focus), and the step's lines lit in
// the stepper's code listing ([data-listing] [data-line]). Clicking a code line jumps to the next step that
// lights it: both sides move together.

const pad2 = (n) => String(n).padStart(2, "0");

function linesOf(step) {
  const raw = step.dataset.lines || "";
  return new Set(raw.split(",").filter(Boolean).map(Number));
}

class Stepper {
  constructor(root) {
    this.root = root;
    this.steps = [...root.querySelectorAll("[data-step]")];
    this.codeLines = [...root.querySelectorAll("[data-listing] [data-line]")];
    this.counter = root.querySelector("[data-counter]");
    this.index = 0;
    const controls = root.querySelector("[data-controls]");
    if (controls) controls.hidden = false;
    root.querySelector("[data-prev]")?.addEventListener("click", () => this.go(this.index - 1));
    root.querySelector("[data-next]")?.addEventListener("click", () => this.go(this.index + 1));
    for (const line of this.codeLines) {
      line.addEventListener("click", () => this.jumpToLine(Number(line.dataset.line)));
    }
    root.classList.add("stepping");
    this.go(0);
  }

  go(i) {
    const n = this.steps.length;
    if (!n) return;
    this.index = Math.max(0, Math.min(n - 1, i));
    this.steps.forEach((s, k) => {
      const on = k === this.index;
      s.classList.toggle("is-current", on);
      s.setAttribute("aria-hidden", on ? "false" : "true");
    });
    const lit = linesOf(this.steps[this.index]);
    let first = null;
    for (const line of this.codeLines) {
      const on = lit.has(Number(line.dataset.line));
      line.classList.toggle("lit", on);
      if (on && !first) first = line;
    }
    this.reveal(first);
    if (this.counter) this.counter.textContent = `${pad2(this.index + 1)}/${pad2(n)}`;
    const prev = this.root.querySelector("[data-prev]");
    const next = this.root.querySelector("[data-next]");
    if (prev) prev.disabled = this.index === 0;
    if (next) next.disabled = this.index === n - 1;
    this.root.dataset.current = String(this.index + 1);
  }

  // A long listing scrolls inside its own box: bring the step's first lit line near its top (the page stays put).
  reveal(line) {
    const box = line?.closest("[data-listing]");
    if (!box || box.scrollHeight <= box.clientHeight) return;
    const offset = line.getBoundingClientRect().top - box.getBoundingClientRect().top;
    if (offset < 0 || offset > box.clientHeight - 2 * line.offsetHeight) box.scrollTop += offset - 2 * line.offsetHeight;
  }

  jumpToLine(line) {
    const n = this.steps.length;
    for (let k = 1; k <= n; k++) {
      const j = (this.index + k) % n;
      if (linesOf(this.steps[j]).has(line)) {
        this.go(j);
        return;
      }
    }
  }
}

const steppers = new Map();
let active = null;

// The stepper j/k acts on: the one last used, while it is on screen; else the one nearest mid-screen.
function target() {
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  };
  if (active && visible(active.root)) return active;
  let best = null;
  let bestDist = Infinity;
  for (const s of steppers.values()) {
    const r = s.root.getBoundingClientRect();
    if (!visible(s.root)) continue;
    const d = Math.abs((r.top + r.bottom) / 2 - window.innerHeight / 2);
    if (d < bestDist) [best, bestDist] = [s, d];
  }
  return best;
}

function onKey(event) {
  if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
  const el = event.target;
  if (el instanceof HTMLElement && (el.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName))) return;
  const focused = el instanceof HTMLElement ? steppers.get(el.closest("[data-stepper]")) : undefined;
  let delta = 0;
  if (event.key === "j") delta = 1;
  else if (event.key === "k") delta = -1;
  else if (focused && event.key === "ArrowRight") delta = 1;
  else if (focused && event.key === "ArrowLeft") delta = -1;
  if (!delta) return;
  const s = focused || target();
  if (!s) return;
  event.preventDefault();
  active = s;
  s.go(s.index + delta);
}

export function initSteppers(doc = document) {
  for (const root of doc.querySelectorAll("[data-stepper]")) {
    const s = new Stepper(root);
    steppers.set(root, s);
    root.addEventListener("pointerdown", () => { active = s; });
    root.addEventListener("focusin", () => { active = s; });
  }
  doc.addEventListener("keydown", onKey);
  return steppers;
}
