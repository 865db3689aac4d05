"""A Chinese recall set, generated in code (nothing downloaded): facts planted early in a long
chat between two friends and asked back much later in other words.

Each fact is stated once among filler turns (small talk on the same everyday topics, so the
distractors are plausible), and its question paraphrases it: different words for the same
thing (妹妹 -> 兄弟姐妹, 牙医 -> 看牙), so matching characters alone does not find it. Scored
like the English evaluation: recall@k of the one evidence turn. Deterministic for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# (fact, question): the question asks for the fact in other words.
FACTS: list[tuple[str, str]] = [
    ("我妹妹下个月要在杭州办婚礼，我得提前请假。", "我家里哪位亲人快要结婚了？在哪个城市？"),
    ("我对花生严重过敏，吃一点就会喘不过气。", "有什么坚果是我绝对不能碰的？"),
    ("我的车是一辆白色的二手丰田卡罗拉。", "我开的是什么牌子、什么颜色的汽车？"),
    ("周四下午三点我约了牙医补牙。", "我哪天要去看牙齿？几点钟？"),
    ("我们公司下周要从海淀搬到望京的新办公楼。", "我们单位的新地址在北京哪一片？"),
    ("我女儿今年九月开始在实验小学上一年级。", "孩子秋天要去哪所学校读书？"),
    ("我养的猫叫豆豆，是一只橘色的公猫。", "我家宠物叫什么名字？是什么样的？"),
    ("上周体检发现我的血压有点高，医生让我少吃盐。", "大夫对我的饮食提了什么建议？为什么？"),
    ("我正在学西班牙语，每周二和周五晚上上课。", "我在进修哪门外语？什么时候上课？"),
    ("我老婆是一名儿科护士，经常要上夜班。", "我爱人从事什么职业？"),
    ("我们打算春节去云南大理和丽江玩一周。", "过年假期我们准备去哪里旅行？"),
    ("我每天早上六点起床去小区附近跑五公里。", "我平时怎么锻炼身体？"),
    ("我爸爸去年做了心脏搭桥手术，现在恢复得不错。", "我父亲之前动过什么大手术？"),
    ("我最喜欢的作家是余华，《活着》我读了三遍。", "我最欣赏哪位小说家？"),
    ("我的房贷每个月要还八千五百块。", "我每月为住房贷款付多少钱？"),
    ("我大学读的是浙江大学的土木工程专业。", "我本科在哪所高校念的？学什么？"),
    ("我弟弟在深圳的一家无人机公司当工程师。", "我的兄弟在南方哪座城市工作？做什么？"),
    ("我不喝咖啡，一喝就整晚睡不着。", "哪种饮料会让我失眠？"),
    ("我们小区的快递柜在三号楼东门旁边。", "包裹寄存的柜子放在哪里？"),
    ("我的生日是十一月二十号，今年打算在家吃火锅。", "我哪天过生日？准备怎么庆祝？"),
]

FILLER_TOPICS: list[list[str]] = [
    [
        "今天天气真不错，阳光很好。",
        "外面又下雨了，出门记得带伞。",
        "这几天降温了，多穿点衣服。",
        "空气质量有点差，我今天戴了口罩。",
        "晚上风挺大的，窗户要关好。",
    ],
    [
        "中午吃了一碗牛肉面，味道还可以。",
        "楼下新开了一家奶茶店，排队的人很多。",
        "晚饭做了西红柿炒鸡蛋。",
        "周末想去吃烤鸭，你有推荐的店吗？",
        "最近在减肥，晚上只吃沙拉。",
    ],
    [
        "今天开会开了一下午，好累。",
        "老板又让我们加班赶项目。",
        "这周的报告终于写完了。",
        "同事请假了，我得帮他处理一些事情。",
        "下午有个客户来访，要准备材料。",
    ],
    [
        "昨晚看了一部电影，剧情一般。",
        "最近在追一部电视剧，挺好看的。",
        "你听过那首新歌吗？",
        "周末想去看个展览。",
        "我最近迷上了一个综艺节目。",
    ],
    [
        "地铁今天特别挤。",
        "路上堵车堵了四十分钟。",
        "我打算换一辆电动车上班。",
        "今天打车花了不少钱。",
        "早上差点没赶上公交。",
    ],
    [
        "你最近怎么样？",
        "好久没聊天了。",
        "哈哈，太好笑了。",
        "嗯嗯，我知道了。",
        "好的，回头再说。",
        "真的吗？那挺好的。",
        "我也是这么想的。",
        "有空一起吃饭吧。",
    ],
]


@dataclass(frozen=True)
class ZhSet:
    turns: list[str]  # "name: text", in chat order
    questions: list[tuple[str, int]]  # (question, index of its evidence turn)


def build(*, turns: int = 600, seed: int = 7) -> ZhSet:
    """``turns`` chat turns; the facts land in the first 60% and are asked at the end."""
    rng = random.Random(seed)
    speakers = ("小王", "小李")
    lines = [rng.choice(rng.choice(FILLER_TOPICS)) for _ in range(turns)]
    slots = rng.sample(range(int(turns * 0.6)), len(FACTS))
    for slot, (fact, _) in zip(slots, FACTS, strict=True):
        lines[slot] = fact
    chat = [f"{speakers[i % 2]}: {line}" for i, line in enumerate(lines)]
    questions = [(q, slot) for slot, (_, q) in zip(slots, FACTS, strict=True)]
    return ZhSet(chat, questions)
