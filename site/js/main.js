// Boots the page's modules. Everything here enhances markup that already reads correctly without scripts.

import { initSandbox } from "pfz/sandbox";
import { initSelftest } from "pfz/selftest";
import { initSteppers } from "pfz/stepper";

document.documentElement.classList.add("js");
initSteppers();
initSandbox();
initSelftest();
document.documentElement.dataset.ready = "true";
