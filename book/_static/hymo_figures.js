// Figures fit the text column (hymo_site.css). A figure shrunk to fit is marked `hymo-shrunk`
// (a zoom-in cursor), and a click on it shows it at its own size over the page, scrolling
// where it is larger than the window (Tab reaches it, Enter opens it too); a click or Escape
// closes that view. Widget figures are drawn after the page has loaded, so each image is
// looked at when it loads, and all of them again when the window changes size.
(function () {
  var FULL = "hymo-figure-full";

  function shrunk(img) {
    var shown = img.getBoundingClientRect().width;
    return shown > 0 && img.naturalWidth > shown + 1;
  }

  function mark(img) {
    if (!img.closest || !img.closest(".bd-article") || img.closest("." + FULL)) {
      return;
    }
    var small = shrunk(img);
    img.classList.toggle("hymo-shrunk", small);
    if (small) {
      img.title = "Shrunk to fit the column: click to see it at full size";
      img.tabIndex = 0;  // reachable with Tab, opened with Enter
    } else if (img.title.indexOf("Shrunk to fit") === 0) {
      img.title = "";
      img.removeAttribute("tabindex");
    }
  }

  function markAll() {
    document.querySelectorAll(".bd-article img").forEach(mark);
  }

  function close() {
    document.querySelectorAll("." + FULL).forEach(function (box) { box.remove(); });
  }

  function open(img) {
    close();
    var box = document.createElement("div");
    box.className = FULL;
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-label", "The figure at full size: click or press Escape to close");
    var full = document.createElement("img");
    full.src = img.src;
    full.alt = img.alt;
    box.appendChild(full);
    box.addEventListener("click", close);
    document.body.appendChild(box);
  }

  document.addEventListener("load", function (event) {
    if (event.target.tagName === "IMG") {
      mark(event.target);
    }
  }, true);  // load does not bubble: catch it on the way down
  window.addEventListener("load", markAll);
  window.addEventListener("resize", markAll);
  document.addEventListener("click", function (event) {
    var img = event.target;
    if (img.tagName === "IMG" && img.closest(".bd-article") && shrunk(img)) {
      event.preventDefault();
      open(img);
    }
  });
  document.addEventListener("keydown", function (event) {
    var img = event.target;
    if (event.key === "Escape") {
      close();
    } else if (event.key === "Enter" && img.tagName === "IMG" &&
               img.classList.contains("hymo-shrunk")) {
      event.preventDefault();
      open(img);
    }
  });
})();
