/**
 * The retry model panel's inline script (plain ES5, no build). Same closed form and words as
 * engine/src/domain/markov.ts; the browser test checks both agree on the values.
 * Step adds one to t; Play steps twice a second; Pause stops; Reset restores the step's
 * default p, q = 0 and t = 0; changing p, q or t pauses and recomputes at the current t.
 */
export const MARKOV_SCRIPT = `(function(){
var el=document.getElementById("retry-model");if(!el)return;
function $(id){return document.getElementById(id)}
var P=$("mk-p"),Q=$("mk-q"),T=$("mk-t"),S=$("mk-step"),timer=null,TT=[0,1,2,3,4,5,6,8,10];
function f(x){return String(Number(x.toFixed(6)))}
function prob(p,q,t){var s=p+q;return s===0?0:p/s*(1-Math.pow(1-s,t))}
function words(p,q){
if(p===0&&q===0)return "Every distribution is stationary: with p = q = 0 nothing ever moves, so the step never completes.";
if(p===1&&q===1)return "Alternating forever: with p = q = 1 the chain flips between 0 and 1 at every step and never settles.";
if(q===0)return "Absorbing: with q = 0 state 1 (completed) is absorbing, so the probability rises monotonically towards 1.";
if(p===0)return "Absorbing in state 0: with p = 0 the chain never leaves 'not completed'.";
var l=1-p-q;
if(l===0)return "Monotone convergence in one step: p + q = 1, so the stationary probability is reached after the first step.";
return l>0?"Monotone convergence towards the stationary probability "+f(p/(p+q))+".":"Oscillating convergence: p + q > 1, so the probability overshoots and undershoots "+f(p/(p+q))+" while converging.";}
function ok(v){return isFinite(v)&&v>=0&&v<=1}
function def(){var o=S.options[S.selectedIndex];var v=o?parseFloat(o.getAttribute("data-p")):NaN;return ok(v)?v:0.5}
function render(){
var p=parseFloat(P.value),q=parseFloat(Q.value),t=Number(T.value);
if(!ok(p)||!ok(q)||!(t>=0&&t<=10000&&Math.floor(t)===t)){$("mk-out-t").textContent="p and q must be between 0 and 1, and t a whole number from 0 to 10000";return}
$("mk-out-t").textContent="P(completed after "+t+" steps) = "+f(prob(p,q,t));
$("mk-out-s").textContent=p+q===0?"every distribution is stationary (p = q = 0)":"p/(p+q) = "+f(p/(p+q));
$("mk-out-b").textContent=words(p,q);
var c=$("mk-row").querySelectorAll("td");for(var i=0;i<c.length;i++)c[i].textContent=f(prob(p,q,TT[i]));}
function pause(){if(timer){clearInterval(timer);timer=null}}
function step(){var t=Number(T.value)||0;if(t>=10000){pause();return}T.value=String(t+1);render()}
el.querySelector("[data-mk-controls]").hidden=false;
el.addEventListener("click",function(e){var b=e.target.closest&&e.target.closest("[data-mk]");if(!b)return;var a=b.getAttribute("data-mk");
if(a==="step")step();else if(a==="play"){if(!timer)timer=setInterval(step,500)}else if(a==="pause")pause();
else if(a==="reset"){pause();P.value=f(def());Q.value="0";T.value="0";render()}});
[P,Q,T].forEach(function(i){i.addEventListener("input",function(){pause();render()})});
S.addEventListener("change",function(){pause();P.value=f(def());Q.value="0";render()});
})();`;
