// The page's scripts have all run (this one comes last): its buttons now do what they say.
// Until then a click on a button that only a script wires up would do nothing (app.css).
document.body.removeAttribute("data-scripts");
