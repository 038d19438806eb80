// The widget embedder (html-manager) typesets widget labels through MathJax 2's one call,
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the site runs MathJax 3, which has
// no Hub, so each label threw "Cannot read properties of undefined (reading 'Queue')".
// Give MathJax 3 that call. MathJax's script is deferred, so it has run by DOMContentLoaded;
// the embedder draws the widgets later, on the window's load event.
document.addEventListener("DOMContentLoaded", function () {
  var mathjax = window.MathJax;
  if (!mathjax || mathjax.Hub || !mathjax.startup) {
    return;  // no math on this page, or a MathJax that already has the call
  }
  mathjax.Hub = {
    Queue: function (job) {
      var element = job[2];
      mathjax.startup.promise.then(function () { return mathjax.typesetPromise([element]); });
    },
  };
});
