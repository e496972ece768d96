// The Copy buttons (docs/dashboard.md, "API clients"): a button beside a key or secret shown
// once puts its `data-copy` text on the clipboard. Without this script, or without a
// clipboard, the buttons stay hidden and the text stays on the page to select by hand.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  if (!navigator.clipboard) {
    return;
  }
  for (const button of document.querySelectorAll("button[data-copy]")) {
    const label = button.textContent;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.textContent = "Copied";
      } catch (refused) {
        button.textContent = "Select it to copy";
      }
      setTimeout(() => { button.textContent = label; }, 3000);
    });
    button.hidden = false;
  }
});
