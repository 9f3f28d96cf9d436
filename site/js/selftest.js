// The "can you" self-test and the mastery items: plain checkboxes, remembered in localStorage under
// pfz:<stage>:<list>. Auto mastery items (data-auto="all" or "group:<name>") tick themselves from the
// self-test. Nothing leaves the browser.

function storage() {
  try {
    const probe = "pfz:probe";
    window.localStorage.setItem(probe, "1");
    window.localStorage.removeItem(probe);
    return window.localStorage;
  } catch {
    return null; // storage off (private mode, file:// policy): ticks work but are not kept
  }
}

function load(store, key) {
  try {
    return JSON.parse(store?.getItem(key) || "{}") || {};
  } catch {
    return {};
  }
}

export function initSelftest(doc = document, stage = "stage-1") {
  const store = storage();
  const lists = [...doc.querySelectorAll("[data-selftest]")];
  const keyOf = (list) => `pfz:${stage}:${list.dataset.selftest}`;
  const canYou = doc.querySelector('[data-selftest="can-you"]');

  const refresh = () => {
    const ticks = canYou ? [...canYou.querySelectorAll("input[type=checkbox]")] : [];
    for (const box of doc.querySelectorAll("input[data-auto]")) {
      const rule = box.dataset.auto;
      const scope = rule === "all" ? ticks : ticks.filter((t) => `group:${t.dataset.group}` === rule);
      box.checked = scope.length > 0 && scope.every((t) => t.checked);
    }
    for (const list of lists) {
      const boxes = [...list.querySelectorAll("input[type=checkbox]")];
      const count = list.querySelector("[data-count]");
      if (count) count.textContent = `${boxes.filter((b) => b.checked).length}/${boxes.length}`;
    }
  };

  for (const list of lists) {
    const saved = load(store, keyOf(list));
    for (const box of list.querySelectorAll("input[type=checkbox]:not([data-auto])")) {
      box.checked = Boolean(saved[box.dataset.id]);
      box.addEventListener("change", () => {
        const state = load(store, keyOf(list));
        if (box.checked) state[box.dataset.id] = true;
        else delete state[box.dataset.id];
        try {
          store?.setItem(keyOf(list), JSON.stringify(state));
        } catch {
          /* full or refused: the tick still shows for this visit */
        }
        refresh();
      });
    }
  }
  refresh();
}
