// The user-frame rule (report/user_frame.h) on paths, with and without the interpreter's e records,
// and the backward attribution.
#include "report/user_frame.h"

#include <gtest/gtest.h>

#include <string>

namespace memguard::report {
namespace {

using format::PathKind;
using O = FrameOrigin;

TEST(UserFrame, ShapesWithoutPaths) {
    const FrameRule rule(std::vector<PythonPath>{});
    EXPECT_FALSE(rule.exact());
    EXPECT_EQ(rule.classify("/home/me/train.py"), O::User);
    EXPECT_EQ(rule.classify("train.py"), O::User);
    EXPECT_EQ(rule.classify("<stdin>"), O::User);
    EXPECT_EQ(rule.classify("<memguard>"), O::Memguard);  // the library's embedded Python (run_source)
    EXPECT_EQ(rule.classify("/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py"), O::Torch);
    EXPECT_EQ(rule.classify("/src/pytorch/torch/nn/functional.py"), O::Torch);  // a source checkout
    EXPECT_EQ(rule.classify("/opt/venv/lib/python3.11/dist-packages/numpy/core.py"), O::ThirdParty);
    EXPECT_EQ(rule.classify("/usr/lib/python3.11/contextlib.py"), O::Stdlib);
    EXPECT_EQ(rule.classify("/usr/lib64/python3/threading.py"), O::Stdlib);
    EXPECT_EQ(rule.classify("<frozen runpy>"), O::Synthetic);
    EXPECT_EQ(rule.classify("<string>"), O::Synthetic);
    EXPECT_EQ(rule.classify(""), O::Synthetic);
    EXPECT_EQ(rule.classify("<eval_with_key>.3"), O::Generated);
    EXPECT_EQ(rule.classify("/tmp/torchinductor_root/ab/cabc123.py"), O::Generated);
    EXPECT_EQ(rule.classify("/tmp/x/fx_generated_0123abcd.py"), O::Generated);
    EXPECT_EQ(rule.classify("torch/_functorch/_aot_autograd/subclass_codegen.py:codegen(runtime_wrapper)"),
              O::Generated);
    // Only directories count: a file named torch.py or a directory torchvision is the user's.
    EXPECT_EQ(rule.classify("/home/me/torch.py"), O::User);
    EXPECT_EQ(rule.classify("/home/me/torchstuff/a.py"), O::User);
    EXPECT_EQ(rule.classify("/home/me/lib/python_tools/a.py"), O::User);
}

TEST(UserFrame, ExactPathsDecideAndTheLongestWins) {
    const FrameRule rule(std::vector<PythonPath>{
        {PathKind::Stdlib, "/opt/py/lib/python3.12"},
        {PathKind::Site, "/opt/py/lib/python3.12/site-packages/"},
        {PathKind::Prefix, "/opt/py"},
        {PathKind::Torch, "/work/pytorch/torch"},
        {PathKind::InductorCache, "/scratch/inductor"},
        {PathKind::Memguard, "/opt/py/lib/python3.12/site-packages/memguard"},
        {PathKind::Prefix, "relative/ignored"},
    });
    EXPECT_TRUE(rule.exact());
    EXPECT_EQ(rule.classify("/opt/py/lib/python3.12/json/decoder.py"), O::Stdlib);
    EXPECT_EQ(rule.classify("/opt/py/lib/python3.12/site-packages/numpy/x.py"), O::ThirdParty);
    EXPECT_EQ(rule.classify("/opt/py/lib/python3.12/site-packages/memguard/pytest_plugin.py"), O::Memguard);
    EXPECT_EQ(rule.classify("/work/pytorch/torch/nn/functional.py"), O::Torch);
    EXPECT_EQ(rule.classify("/scratch/inductor/ab/cabc.py"), O::Generated);
    EXPECT_EQ(rule.classify("/opt/py/lib/python3.11/old.py"), O::Stdlib);  // the prefix's library directories
    EXPECT_EQ(rule.classify("/opt/py/bin/myscript.py"), O::User);          // but not the whole prefix
    // With torch's directory known, another directory named torch is not torch.
    EXPECT_EQ(rule.classify("/home/me/torch/train.py"), O::User);
    EXPECT_EQ(rule.classify("/work/pytorch/torchvision_local/a.py"), O::User);
}

TEST(UserFrame, ResumeNames) {
    std::string fn;
    int line = 0;
    EXPECT_TRUE(parse_resume_name("torch_dynamo_resume_in_forward_at_41", &fn, &line));
    EXPECT_EQ(fn, "forward");
    EXPECT_EQ(line, 41);
    EXPECT_TRUE(parse_resume_name("torch_dynamo_resume_in_my_at_fn_at_7", &fn, &line));
    EXPECT_EQ(fn, "my_at_fn");
    EXPECT_EQ(line, 7);
    EXPECT_FALSE(parse_resume_name("torch_dynamo_resume_in_forward_at_", &fn, &line));
    EXPECT_FALSE(parse_resume_name("torch_dynamo_resume_in_forward_at_4x", &fn, &line));
    EXPECT_FALSE(parse_resume_name("forward", &fn, &line));
}

Report with_frames(const std::vector<std::pair<std::string, std::string>>& frames) {
    Report r;
    PythonStack s;
    s.id = 1;
    uint32_t id = 0;
    for (const auto& [fn, file] : frames) {
        ++id;
        r.python_frames[id] = PythonFrame{id, static_cast<int>(10 * id), fn, file};
        s.frames.push_back(id);
    }
    r.python_stacks[1] = s;
    return r;
}

TEST(UserFrame, CompiledFunctionUnderEvalFrame) {
    const Report r = with_frames({{"call", "/tmp/torchinductor_me/ab/cab.py"},
                                  {"forward", "/x/site-packages/torch/_functorch/aot_autograd.py"},
                                  {"_fn", "/x/site-packages/torch/_dynamo/eval_frame.py"},
                                  {"forward", "/app/model.py"},
                                  {"compile_wrapper", "/x/site-packages/torch/_dynamo/eval_frame.py"},
                                  {"<module>", "/app/train.py"}});
    const UserFrame u = user_frame(r, 1, FrameRule(r));
    ASSERT_TRUE(u.found);
    EXPECT_EQ(u.index, 3u);
    EXPECT_TRUE(u.compiled);
    EXPECT_EQ(user_frame_text(u), "forward at /app/model.py:40 (compiled)");
}

TEST(UserFrame, ResumeFunctionNamesTheFunctionAndLine) {
    const Report r = with_frames({{"torch_dynamo_resume_in_forward_at_57", "/app/model.py"}});
    const UserFrame u = user_frame(r, 1, FrameRule(r));
    ASSERT_TRUE(u.found);
    EXPECT_EQ(user_frame_text(u), "forward at /app/model.py:57 (compiled)");
}

TEST(UserFrame, NoneWhenEveryFrameIsLibraryCode) {
    const Report r = with_frames({{"relu", "/x/site-packages/torch/nn/functional.py"}, {"<module>", "<string>"}});
    EXPECT_FALSE(user_frame(r, 1, FrameRule(r)).found);
    EXPECT_FALSE(user_frame(r, 0, FrameRule(r)).found);
    EXPECT_FALSE(user_frame(r, 9, FrameRule(r)).found);
}

TEST(UserFrame, BackwardThreadAllocationsGoToTheBackwardCall) {
    Report r = with_frames({{"backward", "/x/site-packages/torch/_tensor.py"}, {"step", "/app/train.py"}});
    r.python_frames[9] = PythonFrame{9, 5, "forward", "/app/model.py"};
    r.python_stacks[2] = PythonStack{2, {9}};
    auto block = [&r](int64_t t, uint64_t tid, uint32_t stack, uint32_t py, uint64_t size) {
        Block b;
        b.t_alloc = t, b.tid = tid, b.stack_id = stack, b.python_stack_id = py, b.size = size;
        r.blocks.push_back(b);
    };
    block(1, 100, 1, 2, 10);   // forward on the main thread
    block(2, 200, 7, 0, 10);   // engine thread, before any backward(): not attributed
    block(3, 100, 2, 1, 10);   // the grad seed inside loss.backward()
    block(4, 200, 5, 0, 100);  // engine thread during backward
    block(5, 300, 6, 0, 100);  // another engine thread
    block(6, 100, 1, 2, 10);   // the main thread is back in forward: the call has ended
    block(7, 200, 8, 0, 10);   // after the call: not attributed
    block(8, 100, 3, 0, 10);   // a Python thread without its stack (GIL released): not attributed
    attribute_backward(r);
    EXPECT_EQ(r.backward_sites.size(), 2u);
    EXPECT_EQ(r.backward_sites.count(5), 1u);
    EXPECT_EQ(r.backward_sites.at(5), 1u);
    EXPECT_EQ(r.backward_sites.at(6), 1u);
    const UserFrame u = user_frame(r, r.backward_sites.at(5), FrameRule(r));
    EXPECT_EQ(user_frame_text(u), "step at /app/train.py:20");
}

}  // namespace
}  // namespace memguard::report
